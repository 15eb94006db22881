#!/usr/bin/env python3
"""Writes the GGUF files tests/model/test_gguf_models.cpp loads, from the F32 files llama.cpp's
converter made of the golden checkpoints (tests/data/gguf/models/*.f32.gguf,
tools/convert_test_models_gguf.py), with gguf-py (the `gguf` PyPI package) only:

* MODEL.TYPE.gguf for TYPE in f16, bf16, q8_0, q4_0, q5_0, q5_1: the tensors llama-quantize quantizes
  (2-D or larger `.weight`s but norms, conv1d and routers; rows a whole number of blocks)
  re-encoded by gguf-py's own quantizer, the rest kept F32, metadata copied.
* MODEL.TYPE.dequant.gguf: the same tensors decoded back to F32 by gguf-py's dequantizer, so
  that a quantized file and its dequantized twin hold exactly the same weights.
* hypic_tiny.q4_k_m.dequant.gguf: the committed Q4_K_M file llama-quantize made of the
  embedded model (tools/convert_test_models_gguf.py) with every quantized tensor decoded to F32
  by gguf-py's dequantizer: the K-quants' twin.
* kimi_linear_moe.nogroups.gguf: without kimi-linear.expert_group_count, as llama.cpp's
  converter writes Kimi-Linear (tools/convert_test_models_gguf.py adds it to the test file).
* minimax_rotary.nopattern.gguf: without minimax-01.attention.recurrent_layers, as llama.cpp's
  converter writes MiniMax (the tool adds it): the layer pattern falls back to every 8th layer.
* refuse_arch.gguf (general.architecture 'llama') and refuse_type.gguf (one tensor stored as
  Q2_K): files hypic must refuse, naming what it does not read.

Usage: gguf_variants.py --out DIR [--source-dir REPO]
"""
import argparse
import pathlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

MODELS = ["qwen3_5_dense", "qwen3_5_moe", "qwen3_next_moe", "kimi_linear_moe", "minimax_rotary", "ling3_hybrid"]
TYPES = {"f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q5_0": Q.Q5_0, "q5_1": Q.Q5_1}


def quantizable(t, qtype) -> bool:
    """As llama-quantize's tensor_allows_quantization (src/llama-quant.cpp), and a row a whole
    number of blocks (llama-quantize falls back to another type there; here: kept F32)."""
    name = t.name
    if len(t.shape) < 2 or not name.endswith("weight"):
        return False
    if "_norm.weight" in name or "ffn_gate_inp.weight" in name or "ssm_conv1d" in name:
        return False
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    return int(t.shape[0]) % block == 0


def copy_metadata(reader, writer, skip=()):
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture" or field.name in skip:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def write(reader, path, arch, encode, skip=()):
    """encode(tensor) -> (array, raw_dtype or None); metadata keys in `skip` left out"""
    w = gguf.GGUFWriter(str(path), arch)
    copy_metadata(reader, w, skip)
    for t in reader.tensors:
        data, raw = encode(t)
        if raw is None:
            w.add_tensor(t.name, data)
        else:
            w.add_tensor(t.name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--source-dir", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parents[2])
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    for model in MODELS:
        reader = gguf.GGUFReader(str(a.source_dir / "tests/data/gguf/models" / f"{model}.f32.gguf"))
        arch = reader.fields["general.architecture"].contents()
        for tname, qtype in TYPES.items():
            def quant(t, qtype=qtype):
                if not quantizable(t, qtype):
                    return np.array(t.data), None
                return gguf.quants.quantize(np.array(t.data, dtype=np.float32), qtype), qtype

            def dequant(t, qtype=qtype):
                data = np.array(t.data, dtype=np.float32)
                if not quantizable(t, qtype):
                    return data, None
                q = gguf.quants.quantize(data, qtype)
                return gguf.quants.dequantize(q, qtype).reshape(data.shape).astype(np.float32), None

            write(reader, a.out / f"{model}.{tname}.gguf", arch, quant)
            write(reader, a.out / f"{model}.{tname}.dequant.gguf", arch, dequant)
    kq = gguf.GGUFReader(str(a.source_dir / "tests/data/gguf/models/hypic_tiny.q4_k_m.gguf"))

    def decode(t):
        if t.tensor_type in (Q.F32, Q.F16, Q.BF16):
            return np.array(t.data, dtype=np.float32), None
        return gguf.quants.dequantize(np.array(t.data), t.tensor_type).astype(np.float32), None
    write(kq, a.out / "hypic_tiny.q4_k_m.dequant.gguf", kq.fields["general.architecture"].contents(), decode)
    kimi = gguf.GGUFReader(str(a.source_dir / "tests/data/gguf/models/kimi_linear_moe.f32.gguf"))
    write(kimi, a.out / "kimi_linear_moe.nogroups.gguf", "kimi-linear", lambda t: (np.array(t.data), None),
          skip=("kimi-linear.expert_group_count",))
    minimax = gguf.GGUFReader(str(a.source_dir / "tests/data/gguf/models/minimax_rotary.f32.gguf"))
    write(minimax, a.out / "minimax_rotary.nopattern.gguf", "minimax-01", lambda t: (np.array(t.data), None),
          skip=("minimax-01.attention.recurrent_layers",))
    reader = gguf.GGUFReader(str(a.source_dir / "tests/data/gguf/models/qwen3_5_dense.f32.gguf"))
    write(reader, a.out / "refuse_arch.gguf", "llama", lambda t: (np.array(t.data), None))

    def q2k(t):
        if t.name != "blk.0.ffn_gate.weight":
            return np.array(t.data), None
        rows, cols = t.data.shape  # 256-element Q2_K blocks: a row of 64 floats cannot be one,
        blocks = rows * cols // 256  # so the tensor is declared [256, rows·cols/256]
        raw = np.zeros((blocks, gguf.GGML_QUANT_SIZES[Q.Q2_K][1]), dtype=np.uint8)
        return raw, Q.Q2_K
    write(reader, a.out / "refuse_type.gguf", "qwen35", q2k)
    print(f"wrote {len(list(a.out.glob('*.gguf')))} files to {a.out}")


if __name__ == "__main__":
    main()
