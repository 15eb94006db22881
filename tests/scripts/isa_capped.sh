#!/bin/sh
# isa_capped.sh TIER COMMAND...: runs COMMAND with HYPIC_MAX_ISA=TIER (the kernels an AVX2-only CPU
# runs, on a machine with more), for ctest's isa_avx2.* tests. COMMAND `venv SCRIPT ARGS...` runs
# SCRIPT with the test-side Python (.venv, made by scripts/install.sh; SKIP without it). On a CPU
# without AVX-512 or AVX-VNNI the cap changes nothing and the uncapped run has covered it: SKIP.
tier=$1
shift
if [ "$tier" = avx2 ] && ! grep -qw -e avx512f -e avx_vnni /proc/cpuinfo; then
  echo "SKIP: this CPU's own tier is avx2; the uncapped tests ran its kernels"
  exit 77
fi
if [ "$1" = venv ]; then
  shift
  py="$(dirname "$0")/../../.venv/bin/python"
  if [ ! -x "$py" ]; then
    echo "SKIP: $py not found; run scripts/install.sh"
    exit 77
  fi
  set -- "$py" "$@"
fi
HYPIC_MAX_ISA=$tier exec "$@"
