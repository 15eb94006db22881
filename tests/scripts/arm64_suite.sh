#!/usr/bin/env bash
# hypic's aarch64 build under qemu-aarch64 (make test-arm64): the cross-built binaries in
# BUILD (default build-arm64) run on emulated ARM CPUs, one per ISA tier:
#   cortex-a72   neon     (ARMv8.0: Advanced SIMD only)
#   neoverse-n1  dotprod  (ARMv8.2: sdot / udot)
#   max          sve      (i8mm, bf16, SVE; vector lengths 128 and 512 bits via sve-max-vq)
# On each: `hypic --version` naming the expected tier, the CPU and hash tests, and the kernels
# whose code depends on the tier (GEMV, GEMM, small GEMM, norms and elementwise, quantization)
# against their plain references. On one (max): the whole kernel suite (its throughput prints
# left out), the golden checkpoints (transformers' logits, f32 and bf16), the PIC compositions
# (cold == warm, reordered hits, prefix mode), `hypic run` in each weight type with the x86-64
# build's text and `hypic serve` answering the openai client (tests/scripts/arm64_serve.py).
# Emulation is slow (for correctness only): timings printed here mean nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-arm64}
command -v qemu-aarch64 > /dev/null || { echo "SKIP: qemu-aarch64 missing (scripts/install.sh)"; exit 77; }
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2  # no re-exec of the emulated binary
T0=$SECONDS
step() { echo "== [$((SECONDS - T0)) s] $*"; }

for spec in "cortex-a72 neon" "neoverse-n1 dotprod" "max,sve-max-vq=1 sve" "max,sve-max-vq=4 sve"; do
  read -r cpu want <<< "$spec"
  q=(qemu-aarch64 -cpu "$cpu")
  step "$cpu: hypic --version names tier $want"
  version=$("${q[@]}" "$BUILD/hypic" --version)
  echo "$version" | grep -E "tier|CPU"
  echo "$version" | grep -q "ISA tier: $want" || { echo "FAIL: expected tier $want on $cpu"; exit 1; }
  step "$cpu: test_core, the tier-dependent kernels"
  "${q[@]}" "$BUILD/tests/test_core" --gtest_brief=1
  "${q[@]}" "$BUILD/tests/test_kernels" --gtest_brief=1 \
    --gtest_filter='Gemv*:Gemm.*:SmallGemm*:Norms*:Elementwise*:Quant*:-*Bench*'
done

q=(qemu-aarch64 -cpu max)
step "max: every kernel against its reference"
"${q[@]}" "$BUILD/tests/test_kernels" --gtest_brief=1 --gtest_filter='-*PrintThroughput*:*Bench*'
step "max: golden checkpoints (f32, bf16)"
"${q[@]}" "$BUILD/tests/test_model" --gtest_brief=1 --gtest_filter='Archs/GoldenTest.*'
step "max: PIC compositions"
"${q[@]}" "$BUILD/tests/test_engine" --gtest_brief=1 --gtest_filter='Models/PicModels.ColdAndWarm*:'\
'Models/PicModels.Reordered*:Models/PicModels.PrefixMode*:Compose.ColdAndWarm*:Compose.Reordered*:Compose.PrefixMode*'
step "max: hypic serve + the openai client"
.venv/bin/python tests/scripts/arm64_serve.py --hypic-bin "$BUILD/hypic" --native-bin build/hypic --qemu "${q[*]}"
step "all passed"
