#!/usr/bin/env python3
"""Writes the seed files of corpus/fuzz_safetensors/ (Python standard library only).

Small safetensors files ([u64 LE header length][JSON header][data]) covering what the
reader must accept: every dtype family, metadata, zero-sized and scalar tensors, a header
padded with spaces (the reference writer) or NULs, a data section that starts unaligned,
gaps between tensors. Run it again after changing it:  python3 tests/fuzz/gen_safetensors_seeds.py
"""
import json
import os
import struct
import sys

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I16": 2,
         "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8,
         "F64": 8, "C64": 8}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def image(tensors, metadata=None, pad=b" ", align=8, gaps=0):
    """tensors: [(name, dtype, shape)] laid out in order (largest element first is the
    writer's order; callers pick). Data bytes are a counting pattern."""
    header, data = {}, b""
    for name, dtype, shape in tensors:
        n = numel(shape) * SIZES[dtype]
        begin = len(data)
        data += bytes((begin + i) % 251 for i in range(n))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [begin, len(data)]}
        data += b"\x00" * gaps
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    if align:
        h += pad * ((align - (8 + len(h)) % align) % align)
    return struct.pack("<Q", len(h)) + h + data


SEEDS = {
    "basic": image([("w", "F32", [2, 3]), ("ids", "I64", [2]), ("b", "BF16", [4]),
                    ("h", "F16", [2, 2]), ("m", "U8", [3]), ("flag", "BOOL", [1])],
                   metadata={"format": "pt"}),
    "empty_header": image([]),
    "metadata_only": image([], metadata={"k": "v", "n": "1"}),
    "zero_sized_and_scalar": image([("s", "F32", []), ("z", "F32", [0, 4]), ("z2", "BF16", [3, 0]),
                                    ("e", "I8", [0])]),
    "nul_padded": image([("x", "F16", [3])], pad=b"\x00"),
    "unaligned_data": image([("odd", "U8", [1]), ("f", "F32", [2]), ("b", "BF16", [3])], align=0),
    "metadata_not_strings": image([("x", "F32", [1])], metadata={"a": 1, "b": [1, 2], "c": None}),
    "all_dtypes": image([(f"t_{d.lower()}", d, [2]) for d in
                         sorted(SIZES, key=lambda d: -SIZES[d])]),
    "gaps": image([("a", "F32", [2]), ("b", "F32", [1])], gaps=4),
    "nested_names": image([("model.layers.0.self_attn.q_proj.weight", "BF16", [2, 2]),
                           ("model.embed_tokens.weight", "BF16", [1, 2]),
                           ("\u00e9\u4e2d\ud83d\ude00", "F32", [1])]),
}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_safetensors")
    os.makedirs(out, exist_ok=True)
    for name, b in SEEDS.items():
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(b)
        print(f"{name}.safetensors: {len(b)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
