#!/usr/bin/env bash
# Reproduce hypic-tiny with one command: data -> tokenizer -> training (resumable) -> export.
#
#   tools/tiny/run.sh [train.py options...]      e.g. tools/tiny/run.sh --total-steps 4000
#
# Idempotent: the tokenizer is built once per run directory, training resumes from the newest
# checkpoint, and the export into models/hypic-tiny/ runs once training has finished (RUN/DONE).
# Environment: PYTHON (default /opt/hypic-dev/bin/python), RUN_DIR (default /work/hypic-tiny-run),
# OUT (default <repo>/models/hypic-tiny), EVAL_PER_TASK (default 60), DATA_FORMAT (restated | varied,
# gen_data's fact and reply format for the held-out set and training; default restated), TOKENIZER_FORMAT
# (the tokenizer corpus' format; default varied, the corpus of the shipped model's tokenizer).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-/opt/hypic-dev/bin/python}
RUN=${RUN_DIR:-/work/hypic-tiny-run}
OUT=${OUT:-$REPO/models/hypic-tiny}
FMT=${DATA_FORMAT:-restated}
TOK_FMT=${TOKENIZER_FORMAT:-varied}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$RUN/data"

if [ ! -f "$RUN/tokenizer.json" ]; then
  echo "== data: tokenizer corpus (train split) and held-out set"
  "$PY" "$HERE/gen_data.py" --split train --profile mixed --n 2000 --format "$TOK_FMT" --out "$RUN/data/tokenizer_corpus.jsonl"
  "$PY" "$HERE/gen_data.py" --split heldout --profile eval --per-task 100 --format "$FMT" --out "$RUN/data/heldout.jsonl"
  echo "== tokenizer"
  "$PY" "$HERE/train_tokenizer.py" --data "$RUN/data/tokenizer_corpus.jsonl" --out "$RUN/tokenizer.json" \
        --vocab 4096 --check "$RUN/data/heldout.jsonl"
fi

echo "== training (resumes from $RUN/ckpt if present)"
# train.py exits with 75 for a planned restart (memory hygiene, see --restart-minutes): resume at once
while true; do
  rc=0
  "$PY" "$HERE/train.py" --run-dir "$RUN" --data-format "$FMT" "$@" || rc=$?
  [ "$rc" -eq 75 ] || break
  echo "== planned restart"
done
[ "$rc" -eq 0 ] || { echo "train.py failed with status $rc"; exit "$rc"; }

if [ -f "$RUN/DONE" ]; then
  echo "== export -> $OUT"
  "$PY" "$HERE/export.py" --run-dir "$RUN" --out "$OUT" --eval-per-task "${EVAL_PER_TASK:-60}"
else
  echo "training stopped before the end; run $0 again to resume"
fi
