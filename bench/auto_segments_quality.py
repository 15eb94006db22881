#!/usr/bin/env python3
"""What automatic segmentation costs in answer quality, through the HTTP server: hypic-tiny's
held-out reading tasks asked three ways of one `hypic serve`:

  full       the documents as plain text of the user message, "hypic": {"mode": "full"}
  marked     each document a content part marked as a segment (cache_control), the question after
  separator  one user text: the documents and the question joined by <<PIC_SEP>>, cut by the
             server ("hypic": {"auto_segments": true}), as an unmodified client would send them

Exact match of the normalised answer (tools/tiny/gen_data.normalize_answer, as `hypic eval`),
greedy, the first --n records of each task. Also counts how often separator's answer equals
marked's and full's. One JSON document on stdout, progress on stderr. Standard library only.
  python3 bench/auto_segments_quality.py --hypic-bin build/hypic --model models/hypic-tiny --n 60
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "tiny"))
from gen_data import normalize_answer, render_segment  # noqa: E402
from restart_ttft import Server, call, cpu  # noqa: E402

MODES = ("full", "marked", "separator")


def body(rec, mode, model, max_tokens):
    docs = [render_segment(d) for d in rec["documents"]]
    question = "Question: " + rec["question"]
    if mode == "marked":
        content = [{"type": "text", "text": d, "cache_control": {"type": "segment"}} for d in docs]
        content.append({"type": "text", "text": question})
        hypic = {"mode": "hypic"}
    elif mode == "separator":
        content = "<<PIC_SEP>>".join(docs + [question])
        hypic = {"mode": "hypic", "auto_segments": True}
    else:
        content = "".join(docs) + question
        hypic = {"mode": "full"}
    return {"model": model, "messages": [{"role": "system", "content": rec["system"]}, {"role": "user", "content": content}],
            "temperature": 0, "max_tokens": max_tokens, "cache_salt": rec["id"], "hypic": hypic}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hypic-bin", required=True)
    ap.add_argument("--model", default="models/hypic-tiny")
    ap.add_argument("--data", default=None, help="default: MODEL/eval/heldout.jsonl")
    ap.add_argument("--n", type=int, default=60, help="records per task")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--cache-mem", type=int, default=2048)
    args = ap.parse_args()
    recs, per_task = [], {}
    with open(args.data or os.path.join(args.model, "eval", "heldout.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if per_task.get(r["task"], 0) < args.n:
                per_task[r["task"]] = per_task.get(r["task"], 0) + 1
                recs.append(r)
    root = os.path.abspath("build/auto-segments-quality")
    os.makedirs(root, exist_ok=True)
    s = Server(args, root, "serve", []).start()
    rows = []
    try:
        for i, rec in enumerate(recs):
            row = {"id": rec["id"], "task": rec["task"]}
            for mode in MODES:
                st, raw = call(s.port, "POST", "/v1/chat/completions", body(rec, mode, s.model, args.max_tokens))
                if st != 200:
                    raise SystemExit("%s %s: HTTP %d %s" % (rec["id"], mode, st, raw[:300]))
                j = json.loads(raw)
                text = j["choices"][0]["message"]["content"]
                row[mode] = {"text": text, "em": normalize_answer(text) == normalize_answer(rec["answer"]),
                             "segments": j["usage"]["hypic"]["segments_hit"] + j["usage"]["hypic"]["segments_missed"]}
            if row["separator"]["segments"] != len(rec["documents"]):
                raise SystemExit("%s: the separator cut %d segments, want %d" % (rec["id"], row["separator"]["segments"],
                                                                                len(rec["documents"])))
            rows.append(row)
            if (i + 1) % 20 == 0:
                sys.stderr.write("[auto_segments_quality] %d / %d records\n" % (i + 1, len(recs)))
    finally:
        s.stop()
    out = {"bench": "auto_segments_quality", "model": args.model, "dtype": args.dtype, "n_per_task": args.n,
           "cpu": cpu(), "em": {}, "agreement": {}}
    for task in sorted(per_task) + ["mean"]:
        sel = [r for r in rows if task == "mean" or r["task"] == task]
        out["em"][task] = {m: round(100.0 * sum(r[m]["em"] for r in sel) / len(sel), 1) for m in MODES}
    out["agreement"] = {
        "separator_equals_marked": sum(r["separator"]["text"] == r["marked"]["text"] for r in rows) / len(rows),
        "separator_equals_full": sum(r["separator"]["text"] == r["full"]["text"] for r in rows) / len(rows),
        "marked_equals_full": sum(r["marked"]["text"] == r["full"]["text"] for r in rows) / len(rows)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
