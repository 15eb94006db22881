#!/usr/bin/env python3
"""Writes tests/data/gguf/blocks.gguf with PyPI's `gguf` package (llama.cpp's own writer and
reference dequantization, gguf-py): the fixture of tests/checkpoint/test_gguf.cpp.

* metadata of every GGUF value type (u8 … f64, bool, string, arrays of ints and strings);
* per type hypic reads (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) a [3, 512]
  tensor `w.<TYPE>` — Q8_0 / Q4_0 / Q5_0 / Q5_1 quantized by gguf-py, the K-quants random blocks with sane scales
  (gguf-py has no K-quant quantizer) — and `ref.<TYPE>`, gguf-py's dequantization of it in F32:
  hypic's decoding of each block format is checked against llama.cpp's reference, not its own;
* `w.Q2_K`, a type hypic refuses (the refusal names tensor and type).

tests/data/gguf/tokenizer_<pre>.gguf: the tokenizer.json of a committed test checkpoint written
as llama.cpp's converter writes a byte-level BPE (`_set_vocab_gpt2`: tokens by id with holes
typed UNUSED, merges "a b", special added tokens CONTROL, other added tokens USER_DEFINED,
`tokenizer.ggml.pre` the split's name), for tests/model/test_gguf.cpp to compare against the
directory's tokenizer.

Also the seed corpus of the fuzz target (tests/fuzz/corpus/fuzz_gguf/): small files, one
block of each type, metadata of each kind.

    python3 -m venv /tmp/ggufenv && /tmp/ggufenv/bin/pip install gguf==0.19.0
    /tmp/ggufenv/bin/python tools/make_gguf_fixtures.py
"""
import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "gguf", "blocks.gguf")
ROWS, COLS = 3, 512


def random_blocks(rng, qtype, scale_offsets):
    """Random block bytes whose f16 scale fields hold small finite values."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = ROWS * COLS // block
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for off in scale_offsets:
        raw[:, off:off + 2] = np.frombuffer(rng.uniform(0.001, 0.05, n).astype(np.float16).tobytes(), np.uint8).reshape(n, 2)
    return raw.reshape(ROWS, COLS // block * size)


def write_seeds(rng):
    out = os.path.join(os.path.dirname(os.path.dirname(OUT)), "..", "fuzz", "corpus", "fuzz_gguf")
    os.makedirs(out, exist_ok=True)
    x = rng.standard_normal((1, 256)).astype(np.float32)
    for name, qtype in (("f32", T.F32), ("f16", T.F16), ("bf16", T.BF16), ("q8_0", T.Q8_0), ("q4_0", T.Q4_0),
                        ("q5_0", T.Q5_0), ("q5_1", T.Q5_1), ("q4_k", T.Q4_K), ("q5_k", T.Q5_K), ("q6_k", T.Q6_K)):
        w = gguf.GGUFWriter(os.path.join(out, name + ".gguf"), "qwen35")
        w.add_uint32("qwen35.block_count", 1)
        w.add_float32("qwen35.attention.layer_norm_rms_epsilon", 1e-6)
        w.add_bool("test.bool", False)
        w.add_array("tokenizer.ggml.tokens", ["a", "b"])
        w.add_array("tokenizer.ggml.token_type", [1, 3])
        if qtype == T.F32:
            w.add_tensor("t", x)
        elif qtype == T.F16:
            w.add_tensor("t", x.astype(np.float16))
        elif qtype in (T.BF16, T.Q8_0, T.Q4_0, T.Q5_0, T.Q5_1):
            q = quants.quantize(x, qtype)
            w.add_tensor("t", q, raw_shape=q.shape, raw_dtype=qtype)
        else:
            _, size = gguf.GGML_QUANT_SIZES[qtype]
            q = rng.integers(0, 256, size=(1, size), dtype=np.uint8)
            w.add_tensor("t", q, raw_shape=q.shape, raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    print("wrote the seeds under %s" % os.path.normpath(out))


def write_tokenizer(model, pre):
    import json
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t = json.load(open(os.path.join(root, "tests", "models", model, "tokenizer.json"), encoding="utf-8"))
    vocab = t["model"]["vocab"]
    added = {a["id"]: a for a in t.get("added_tokens", [])}
    n = max(list(vocab.values()) + list(added)) + 1
    tokens, types = [], []
    by_id = {i: tok for tok, i in vocab.items()}
    for i in range(n):
        if i in added:
            tokens.append(added[i]["content"])
            types.append(gguf.TokenType.CONTROL if added[i].get("special") else gguf.TokenType.USER_DEFINED)
        elif i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append("[PAD%d]" % i)
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in t["model"]["merges"]]
    out = os.path.join(os.path.dirname(OUT), "tokenizer_%s.gguf" % pre)
    w = gguf.GGUFWriter(out, "hypic-test")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote %s (%s's tokenizer)" % (out, model))


def main():
    rng = np.random.default_rng(41)
    write_seeds(rng)
    write_tokenizer("qwen3_5_dense", "qwen2")
    write_tokenizer("minimax_moe", "qwen35")
    write_tokenizer("ring_linear_moe", "bailingmoe2")
    w = gguf.GGUFWriter(OUT, "hypic-test")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.25)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "héllo")
    w.add_array("test.ints", [1, 2, 3])
    w.add_array("test.strings", ["a", "bc", ""])
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**40))
    w.add_float64("test.f64", 1e-300)

    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    stored = {
        "F32": (x, T.F32),
        "F16": (x.astype(np.float16), T.F16),
        "BF16": (quants.quantize(x, T.BF16), T.BF16),
        "Q8_0": (quants.quantize(x, T.Q8_0), T.Q8_0),
        "Q4_0": (quants.quantize(x, T.Q4_0), T.Q4_0),
        "Q5_0": (quants.quantize(x, T.Q5_0), T.Q5_0),
        "Q5_1": (quants.quantize(x, T.Q5_1), T.Q5_1),
        "Q4_K": (random_blocks(rng, T.Q4_K, [0, 2]), T.Q4_K),
        "Q5_K": (random_blocks(rng, T.Q5_K, [0, 2]), T.Q5_K),
        "Q6_K": (random_blocks(rng, T.Q6_K, [208]), T.Q6_K),
    }
    for name, (data, qtype) in stored.items():
        if qtype in (T.F32, T.F16):
            w.add_tensor("w." + name, data)
        else:
            w.add_tensor("w." + name, data, raw_shape=data.shape, raw_dtype=qtype)
        ref = quants.dequantize(data, qtype) if qtype not in (T.F32, T.F16) else data.astype(np.float32)
        w.add_tensor("ref." + name, ref.astype(np.float32).reshape(ROWS, COLS))
    q2k = random_blocks(rng, T.Q2_K, [80, 82])
    w.add_tensor("w.Q2_K", q2k, raw_shape=q2k.shape, raw_dtype=T.Q2_K)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote %s (%d bytes)" % (OUT, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
