#!/usr/bin/env bash
# Installs what building, running and testing hypic needs. Idempotent and quick when
# everything is present. Debian 12 packages; a Python venv (.venv) for test-side Python.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(cmake g++ libcpp-httplib-dev libboost-dev make pkg-config libdnnl-dev nlohmann-json3-dev libgtest-dev
          python3 python3-venv libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
          clang libclang-rt-14-dev)  # clang + libFuzzer: tests/fuzz/
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

# Test-side Python (no torch: heavy tools live in tools/ and use their own environment).
PY_PKGS=(numpy tokenizers safetensors openai)
STAMP=.venv/.hypic-stamp
WANT="${PY_PKGS[*]}"
if [[ ! -f $STAMP || "$(cat $STAMP)" != "$WANT" ]]; then
  echo "install: python venv .venv: ${PY_PKGS[*]}"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q "${PY_PKGS[@]}"
  echo "$WANT" > $STAMP
fi
