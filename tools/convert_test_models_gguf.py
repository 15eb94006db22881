#!/usr/bin/env python3
"""Converts hypic's golden test checkpoints (tests/models/*) to GGUF with llama.cpp's own
converter, so that the GGUF loader is tested against exactly what llama.cpp users download.

Developer tool (needs torch; never run in CI). The outputs are committed under
tests/data/gguf/models/ (F32: the loader's transforms are exact there; the quantised types
are written from these by the test itself with gguf-py, tests/model/gguf_variants.py).

    pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36   # vendors llama.cpp
    tar xzf llama_cpp_python-0.3.36.tar.gz
    /opt/hypic-dev/bin/python tools/convert_test_models_gguf.py \
        --llama-cpp llama_cpp_python-0.3.36/vendor/llama.cpp \
        [--llama-quantize BUILD/bin/llama-quantize]

With --llama-quantize (a llama.cpp build of the same source, e.g. the one bench/peer_llamacpp.py
makes in its cache) it also writes hypic_tiny.q4_k_m.gguf: the embedded model (models/hypic-tiny,
hidden 256: whole K-quant super-blocks, which the goldens' hidden 64 cannot hold) converted to
F32 and quantized to Q4_K_M by llama-quantize (Q4_K and Q6_K tensors, as users' files mix them).

The test checkpoints' tokenizers are tiny trained BPEs whose pre-tokenizer hash is not in
llama.cpp's table (`get_vocab_base_pre` raises for them), so the converter is run with that
one method answering the family's `pre` name (what it answers for the real checkpoints);
everything else is llama.cpp's code unchanged.
"""
import argparse
import pathlib
import runpy
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

# test checkpoint -> the `tokenizer.ggml.pre` llama.cpp writes for the real model
MODELS = {
    "qwen3_5_dense": "qwen35",
    "qwen3_5_moe": "qwen35",
    "qwen3_next_moe": "qwen2",
}
EMBEDDED = ("hypic_tiny", ROOT / "models/hypic-tiny", "qwen35")


def convert(script, base, src, pre, out, *extra):
    """llama.cpp's convert_hf_to_gguf.py on checkpoint `src`, F32, get_vocab_base_pre → pre."""
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer, pre=pre: pre
    sys.argv = [str(script), str(src), "--outtype", "f32", "--outfile", str(out), *extra]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            sys.exit(f"converting {src} failed ({e.code})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, type=pathlib.Path,
                    help="llama.cpp source tree (holds convert_hf_to_gguf.py)")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "tests/data/gguf/models")
    ap.add_argument("--llama-quantize", type=pathlib.Path,
                    help="llama.cpp's llama-quantize: also write hypic_tiny.q4_k_m.gguf")
    ap.add_argument("models", nargs="*", default=list(MODELS), help="test checkpoints to convert")
    a = ap.parse_args()
    script = a.llama_cpp / "convert_hf_to_gguf.py"
    if not script.is_file():
        sys.exit(f"{script} not found: pass the llama.cpp source tree")
    sys.path.insert(0, str(a.llama_cpp))
    sys.path.insert(1, str(a.llama_cpp / "gguf-py"))
    from conversion import base  # llama.cpp's converter classes

    a.out.mkdir(parents=True, exist_ok=True)
    for name in a.models:
        out = a.out / f"{name}.f32.gguf"
        convert(script, base, ROOT / "tests/models" / name, MODELS[name], out)
        print(f"{out}: {out.stat().st_size} bytes")
    if a.llama_quantize:
        name, src, pre = EMBEDDED
        with tempfile.TemporaryDirectory() as tmp:
            f32 = pathlib.Path(tmp) / f"{name}.f32.gguf"
            convert(script, base, src, pre, f32, "--no-mtp")  # it has no MTP block
            out = a.out / f"{name}.q4_k_m.gguf"
            if subprocess.run([str(a.llama_quantize), str(f32), str(out), "Q4_K_M"],
                              stdout=subprocess.DEVNULL).returncode != 0:
                sys.exit(f"llama-quantize failed on {f32}")
        print(f"{out}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
