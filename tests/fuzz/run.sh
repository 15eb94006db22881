#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/CMakeLists.txt, clang) into build-fuzz and runs
# each on a copy of its seed corpus for SECONDS (default 30; `make test` runs 15, a long run
# is e.g. `tests/fuzz/run.sh 3600`). Every input under tests/fuzz/regressions/<target>/ is
# replayed first. Exit status: 0 clean, 1 a target failed (its crashing inputs are copied to
# tests/fuzz/regressions/<target>/ for committing, with the fix), 77 clang++ or libFuzzer
# missing (ctest reports SKIP).
#
# SECONDS = 0: build, replay the regressions and run the seed corpora once (no fuzzing).
# Environment: HYPIC_FUZZ_BUILD (build dir, default <repo>/build-fuzz), HYPIC_FUZZ_CXX
# (clang++ to use), HYPIC_FUZZ_JOBS (build jobs and targets run at once, default nproc),
# HYPIC_FUZZ_TARGETS (space-separated subset), HYPIC_FUZZ_KEEP=1 (keep the temp dir).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
SECS=${1:-30}
if ! [[ $SECS =~ ^[0-9]+$ ]]; then
  echo "usage: tests/fuzz/run.sh [SECONDS]" >&2
  exit 2
fi
BUILD=${HYPIC_FUZZ_BUILD:-$ROOT/build-fuzz}
JOBS=${HYPIC_FUZZ_JOBS:-$(nproc)}
TARGETS=(fuzz_request fuzz_pretokenize fuzz_safetensors fuzz_gguf fuzz_entry fuzz_tiktoken fuzz_http_framing)
[[ -n ${HYPIC_FUZZ_TARGETS:-} ]] && read -ra TARGETS <<< "$HYPIC_FUZZ_TARGETS"
FUZZ_DIR=$ROOT/tests/fuzz

# ---- toolchain ---------------------------------------------------------------------------
CXX_FUZZ=${HYPIC_FUZZ_CXX:-}
if [[ -z $CXX_FUZZ ]]; then
  for c in clang++ clang++-14 clang++-15 clang++-16 clang++-17 clang++-18; do
    if command -v "$c" > /dev/null; then CXX_FUZZ=$(command -v "$c"); break; fi
  done
fi
if [[ -z $CXX_FUZZ ]] || ! command -v "$CXX_FUZZ" > /dev/null; then
  echo "SKIP: clang++ not found (Debian: apt-get install clang libclang-rt-14-dev, as scripts/install.sh does)"
  exit 77
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hypic-fuzz.XXXXXX") || exit 1
keep_tmp=${HYPIC_FUZZ_KEEP:-0}
cleanup() { [[ $keep_tmp == 1 ]] || rm -rf "$TMP"; }
trap cleanup EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  > "$TMP/probe.cpp"
if ! "$CXX_FUZZ" -fsanitize=fuzzer,address,undefined "$TMP/probe.cpp" -o "$TMP/probe" \
     > "$TMP/probe.log" 2>&1; then
  echo "SKIP: $CXX_FUZZ cannot link libFuzzer with ASan/UBSan (Debian: libclang-rt-14-dev):"
  tail -5 "$TMP/probe.log"
  exit 77
fi

# ---- build -------------------------------------------------------------------------------
start=$(date +%s)
# Configured every time (quick once cached): a target added since the last run is then known.
cmake -S "$FUZZ_DIR" -B "$BUILD" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" > "$TMP/configure.log" 2>&1 \
  || { cat "$TMP/configure.log"; echo "FAIL: configuring $BUILD"; exit 1; }
if ! cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" > "$TMP/build.log" 2>&1; then
  grep -E "error|undefined reference" "$TMP/build.log" | head -40
  keep_tmp=1
  echo "FAIL: building the fuzz targets in $BUILD (clang++; full log: $TMP/build.log)"
  exit 1
fi
echo "fuzz: built in $(( $(date +%s) - start )) s ($BUILD)"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
COMMON=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -print_funcs=0)
dict_of() { [[ $1 == fuzz_pretokenize ]] || echo "-dict=$FUZZ_DIR/json.dict"; }

failed=0
# Copies a failing target's artifacts into tests/fuzz/regressions/<target>/ and says so.
report_failure() {
  local t=$1 log=$2
  failed=1
  echo "FAIL: $t (log: $log)"
  grep -vE '^(#[0-9]+|INFO:|\s+NEW_FUNC|[[:space:]]*")' "$log" | tail -60
  local found=0
  for a in "$TMP/artifacts/$t"/*; do
    [[ -f $a ]] || continue
    found=1
    mkdir -p "$FUZZ_DIR/regressions/$t"
    cp "$a" "$FUZZ_DIR/regressions/$t/"
    echo "FAIL: $t: input $a, copied to tests/fuzz/regressions/$t/$(basename "$a")"
  done
  ((found)) || echo "FAIL: $t exited non-zero without writing an input"
  keep_tmp=1
}

# ---- regressions -------------------------------------------------------------------------
for t in "${TARGETS[@]}"; do
  dir=$FUZZ_DIR/regressions/$t
  files=()
  [[ -d $dir ]] && while IFS= read -r -d '' f; do files+=("$f"); done \
    < <(find "$dir" -type f ! -name '.*' ! -name '*.md' -print0 | sort -z)
  ((${#files[@]})) || continue
  log=$TMP/$t.regressions.log
  if "$BUILD/$t" "${COMMON[@]}" -artifact_prefix="$TMP/$t.regression-" "${files[@]}" \
       > "$log" 2>&1; then
    echo "fuzz: $t: ${#files[@]} regression input(s) pass"
  else
    failed=1
    keep_tmp=1
    echo "FAIL: $t: a regression input fails again (log: $log):"
    grep -vE '^(INFO:|\s+NEW_FUNC)' "$log" | tail -60
  fi
done

# ---- fuzzing -----------------------------------------------------------------------------
run_target() {
  local t=$1
  mkdir -p "$TMP/corpus/$t" "$TMP/artifacts/$t"
  [[ -d $FUZZ_DIR/corpus/$t ]] && cp -R "$FUZZ_DIR/corpus/$t/." "$TMP/corpus/$t/"
  local budget=(-max_total_time="$SECS")
  ((SECS == 0)) && budget=(-runs=0)
  "$BUILD/$t" "${budget[@]}" "${COMMON[@]}" $(dict_of "$t") \
    -artifact_prefix="$TMP/artifacts/$t/" "$TMP/corpus/$t" > "$TMP/$t.log" 2>&1
  echo $? > "$TMP/$t.rc"
}
echo "fuzz: ${#TARGETS[@]} target(s), ${SECS} s each, $JOBS at a time"
running=0
for t in "${TARGETS[@]}"; do
  if ((running >= JOBS)); then wait -n; ((running--)); fi
  run_target "$t" &
  ((running++))
done
wait

for t in "${TARGETS[@]}"; do
  log=$TMP/$t.log
  rc=$(cat "$TMP/$t.rc" 2>/dev/null || echo 1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)
  if [[ $rc == 0 ]]; then
    printf 'fuzz: %-17s ok: %s runs, %s exec/s, %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-}"
  else
    report_failure "$t" "$log"
  fi
done
echo "fuzz: total $(( $(date +%s) - start )) s"
if ((failed)); then
  echo "FAIL: fuzzing found a problem; temp dir kept: $TMP"
  exit 1
fi
exit 0
