#!/usr/bin/env python3
"""Export a hypic-tiny training checkpoint as a Hugging Face model directory and evaluate it.

    python export.py [--run-dir /work/hypic-tiny-run] [--ckpt PATH] [--out models/hypic-tiny]
                     [--eval-per-task 100] [--eval-dtype float32|bfloat16]

Writes OUT/: config.json + bf16 model.safetensors (Qwen3_5ForCausalLM.save_pretrained, text-only
format: model_type qwen3_5_text, tensors model.*, tied embeddings so no lm_head.weight),
tokenizer.json, tokenizer_config.json (ChatML chat_template, eos <|im_end|>), generation_config.json
(greedy), eval_results.json and README.md (the model card). Then reloads OUT with
AutoModelForCausalLM / AutoTokenizer (stock transformers code, no training-time kernel swap) and
measures held-out exact-match accuracy per task with greedy `generate` on the engine's prompt
layout (full recompute, i.e. the `full` mode reference).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import gen_data  # noqa: E402
import gen_tools  # noqa: E402
import extend_vocab  # noqa: E402
import train as T  # noqa: E402
import train_tokenizer as TT  # noqa: E402

MAX_BYTES = 40 * 1024 * 1024


def evaluate_dir(out: str, per_task: int, dtype: torch.dtype, log=print) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=dtype)
    model.eval()
    eos = tok.convert_tokens_to_ids(gen_data.EOS)
    res: dict = {"per_task": {}, "per_kind": {}, "n_per_task": per_task, "dtype": str(dtype).replace("torch.", ""),
                 "prompt_tokens": {}, "examples": []}
    records, outputs = [], []
    t0 = time.time()
    for task in gen_data.TASKS:
        ok_n, lens = 0, []
        for i in range(per_task):
            rec = gen_data.make_example("heldout", "eval", i, task)
            # the engine tokenises prefix, segments and suffix separately; the chat template renders the same
            # string, and gen_data/train_tokenizer check that both tokenisations agree
            ids = []
            for part in [gen_data.PREFIX] + [gen_data.render_segment(d) for d in rec["documents"]] + \
                    [gen_data.render_suffix(rec["question"])]:
                ids += tok.encode(part, add_special_tokens=False)
            if i == 0 and task == "single":
                user = "".join(gen_data.render_segment(d) for d in rec["documents"]) + "Question: " + rec["question"]
                chat = tok.apply_chat_template([{"role": "system", "content": gen_data.SYSTEM},
                                                {"role": "user", "content": user}],
                                               tokenize=False, add_generation_prompt=True)
                assert chat == gen_data.render_prompt(rec), "chat template and engine layout differ"
                assert tok.encode(chat, add_special_tokens=False) == ids
            lens.append(len(ids))
            x = torch.tensor([ids])
            with torch.no_grad():
                y = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=48,
                                   do_sample=False, eos_token_id=eos, pad_token_id=eos)
            out_ids = [int(t) for t in y[0, len(ids):]]
            text = tok.decode(out_ids, skip_special_tokens=True)
            records.append(rec)
            outputs.append({"id": rec["id"], "task": task, "output_ids": out_ids, "text": text})
            ok = gen_data.normalize_answer(text) == gen_data.normalize_answer(rec["answer"])
            ok_n += ok
            kind = rec["kind"].split(".")[0] if task == "aggregate" else rec["kind"]
            kk = res["per_kind"].setdefault(f"{task}:{kind}", [0, 0])
            kk[0] += int(ok)
            kk[1] += 1
            if i < 3:
                res["examples"].append({"task": task, "question": rec["question"], "answer": rec["answer"],
                                        "output": text, "prompt_tokens": len(ids)})
        res["per_task"][task] = ok_n / per_task
        res["prompt_tokens"][task] = {"min": min(lens), "mean": round(sum(lens) / len(lens)), "max": max(lens)}
        log(f"  {task:9s} {ok_n}/{per_task} = {ok_n / per_task:.3f}   prompt tokens {res['prompt_tokens'][task]}"
            f"   ({time.time() - t0:.0f} s)")
    res["per_kind"] = {k: {"correct": v[0], "n": v[1], "acc": round(v[0] / v[1], 3)}
                       for k, v in sorted(res["per_kind"].items())}
    res["eval_seconds"] = round(time.time() - t0)
    # the held-out records (the default data of `hypic eval`) and transformers' greedy outputs on them
    # (the engine's agreement test: tests/engine/test_tiny_agreement.cpp)
    os.makedirs(os.path.join(out, "eval"), exist_ok=True)
    for name, rows in (("heldout.jsonl", records), ("reference_outputs.jsonl", outputs)):
        with open(os.path.join(out, "eval", name), "w") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    # the tool-use records of `hypic eval --tasks tools`
    gen_tools.write_records(os.path.join(out, "eval", "tools_heldout.jsonl"), "heldout", 50)
    return res


def dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def stages_of(ck: dict) -> list[dict]:
    """The training stages behind a checkpoint, oldest first: each run that started from another run's
    checkpoint (train.py --init-from) is one stage; their checkpoints hold the args and counters."""
    out = []
    while True:
        a, st = ck["args"], ck["state"]
        out.append({"format": a.get("data_format", "varied"), "steps": st["step"], "total": a.get("total_steps"),
                    "tokens": st["real_tokens"], "cpu_h": st.get("cpu_seconds", st["train_seconds"]) / 3600,
                    "lr": a.get("lr"), "run": a.get("run_dir"), "from": a.get("init_from") or "",
                    "curriculum_start": a.get("curriculum_start", 0.0), "threads": a.get("threads"),
                    "context_lookup_init": a.get("context_lookup_init", False),
                    "induction_init": a.get("induction_init", "")})
        out[-1]["tools_share"] = a.get("tools_share", 0.0)
        if out[-1]["tools_share"]:
            out[-1].update({k: a.get(k) for k in ("tools_layout", "tools_preface", "twin_offset")})
        if a.get("init_from") and os.path.isdir(a["init_from"]):  # an exported model: its stages file
            path = os.path.join(a["init_from"], "training_stages.json")
            out += json.load(open(path))[::-1] if os.path.exists(path) else []
            break
        if not a.get("init_from") or not os.path.exists(a["init_from"]):
            break
        ck = torch.load(a["init_from"], map_location="cpu", weights_only=False)
    return out[::-1]


def model_card(cfg: dict, n_params: int, st: dict, targs: dict, ev: dict | None, size: int,
               stages: list[dict]) -> str:
    restated = stages[-1]["format"] == "restated"
    twins = next((s["line_start_tokens"] for s in stages if s.get("line_start_tokens")), 0)
    init = stages[0]  # a later stage loads its weights over its own initialisation
    hist = st.get("history", [])
    last = hist[-1] if hist else {}
    evals = st.get("evals", [])
    total = targs.get("total_steps")
    finished = st["step"] >= (total or 0)
    lines = [
        "# hypic-tiny",
        "",
        "A small hybrid-attention language model trained from scratch by the hypic project to read "
        "multi-document prompts and answer short questions about them"
        + (", and to call tools described in its system turn" if stages[-1].get("tools_share") else "") + ". It is hypic's embedded default "
        "model and the model on which the quality of every serving mode (`full`, `prefix`, `hypic`, "
        "`naive`) is measured, since no real checkpoint can be downloaded on the project's machines.",
        "",
        "It knows nothing about the real world: it was trained only on generated documents about "
        "fictional people, towns and companies (`tools/tiny/gen_data.py`).",
        "",
        "## Status" if not finished else "## Training status",
        "",
        (f"**Training finished** at step {st['step']} of {total}." if finished else
         f"**Intermediate export** at step {st['step']} of {total}: training is not finished; the scores "
         "below are those of this checkpoint."),
        "",
        "## Architecture",
        "",
        f"`Qwen3_5ForCausalLM` (transformers {cfg.get('transformers_version', '')}, `model_type` "
        f"`{cfg['model_type']}`, text-only), {n_params / 1e6:.2f} M parameters (tied embeddings), bf16 "
        f"weights, {size / 1e6:.1f} MB on disk.",
        "",
        "| | |",
        "|---|---|",
        f"| layers | {cfg['num_hidden_layers']}: " + ", ".join(
            "GDN" if t == "linear_attention" else "attn" for t in cfg["layer_types"]) + " |",
        f"| hidden / MLP | {cfg['hidden_size']} / {cfg['intermediate_size']} (SwiGLU) |",
        f"| full attention | {cfg['num_attention_heads']} heads, {cfg['num_key_value_heads']} kv heads, head_dim "
        f"{cfg['head_dim']}, output gate, partial RoPE "
        f"({int(cfg['head_dim'] * cfg['rope_parameters']['partial_rotary_factor'])} dims, theta "
        f"{cfg['rope_parameters']['rope_theta']:g}) |",
        f"| Gated DeltaNet | {cfg['linear_num_key_heads']} key heads x {cfg['linear_key_head_dim']}, "
        f"{cfg['linear_num_value_heads']} value heads x {cfg['linear_value_head_dim']}, conv kernel "
        f"{cfg['linear_conv_kernel_dim']} |",
        f"| vocabulary | {cfg['vocab_size']} (byte-level BPE, Qwen2 pre-tokenizer, specials <\\|endoftext\\|>, "
        "<\\|im_start\\|>, <\\|im_end\\|>" + (f"; after them {twins} line-start twins of capitalised words, "
        "so that a name at a line start, as in a tool call's argument, is the tokens it is after a space "
        "(`tools/tiny/extend_vocab.py`)" if twins else "") + ") |",
        "",
        "## Prompt format",
        "",
        "ChatML; the documents are separate blocks of the user turn, before the question. This is exactly "
        "how hypic composes a request: prefix, one independent segment per document, suffix.",
        "",
        "```",
        "<|im_start|>system\\n" + gen_data.SYSTEM + "<|im_end|>\\n<|im_start|>user\\n     <- prefix",
        "Document: {title}\\n{text}\\n\\n                                  <- one segment per document",
        "Question: {question}<|im_end|>\\n<|im_start|>assistant\\n          <- suffix",
        ("Answer: {fact restated}<|im_end|>                              <- the model's reply"
         if restated else "Answer: {answer}<|im_end|>                                       <- the model's reply"),
        "```",
        "",
        "Each segment begins with a letter and ends with `.\\n\\n`, so it tokenises identically on its own "
        "and inside any prompt. The chat template renders the same string from messages "
        "`[system, user = segments + \"Question: \" + question]`. "
        + ("Documents state each fact in one form, `The {attribute} of {entity} is {value}.`, and the reply "
           "restates it (`Answer: The mayor of Brennwick is Tova Lindqvar`; two-hop: both facts, joined by "
           "`. `; aggregation: the list or count itself). Answers are scored on the value(s) read back "
           "from the reply (`gen_data.normalize_answer`: the text after each fact's last ` is `), "
           "case-insensitive exact match." if restated else
           "Answers are scored after removing `Answer:` (case-insensitive exact match)."),
        "",
        "## Tasks and held-out scores",
        "",
        "Held-out prompts use another seed and entity names disjoint from training (every generated name "
        "belongs to one split by a hash of its text). 3-8 documents of ~100-1500 tokens, prompts ~1-4k "
        "tokens; the gold documents sit among distractors of the same kind.",
        "",
        "* **single** (TriviaQA-like): one attribute of one entity.",
        "* **two_hop** (HotpotQA-like): entity -> bridge entity (another document) -> attribute; the "
        "question asks for both, the answer is `bridge, value`.",
        "* **aggregate** (multi-document-summarisation-like): list (in document order) or count the "
        "entities of the documents that share an attribute value.",
        "",
    ]
    if ev:
        lines += [f"Greedy decoding with transformers `generate`, {ev['dtype']} compute on the exported weights, "
                  f"{ev['n_per_task']} prompts per task, full recompute (the `full` mode reference):", "",
                  "| task | accuracy | prompt tokens (min / mean / max) |", "|---|---|---|"]
        for t in gen_data.TASKS:
            p = ev["prompt_tokens"][t]
            lines.append(f"| {t} | {100 * ev['per_task'][t]:.1f} % | {p['min']} / {p['mean']} / {p['max']} |")
        lines += ["", "By kind: " + ", ".join(f"`{k}` {100 * v['acc']:.0f} % (n={v['n']})"
                                              for k, v in ev["per_kind"].items()), ""]
    else:
        lines += ["(not evaluated in this export)", ""]
    if stages[-1].get("tools_share"):
        lines += [
            "## Tool calling",
            "",
            "The last training stage adds tool-use conversations (`tools/tiny/gen_tools.py`) in the layout hypic's "
            "server writes for a request with `tools` (Qwen3.5's tool format; with `--auto-segments tools` each "
            "tool's JSON is its own segment):",
            "",
            "```",
            "<|im_start|>system\\n# Tools ... <tools>\\n{tool 1 JSON}\\n{tool 2 JSON} ... </tools> ... </IMPORTANT>\\n\\n"
            + gen_tools.SYSTEM + "<|im_end|>",
            "<|im_start|>user\\n[Document: ...\\n\\n]Question: What is the river level of Brennwick?<|im_end|>",
            "<|im_start|>assistant\\n" + ("The river level of Brennwick.\\n\\n" if stages[-1].get("tools_preface") else "")
            + "<tool_call>\\n<function=river_level_check>\\n<parameter=town>\\nBrennwick\\n"
            "</parameter>\\n</function>\\n</tool_call><|im_end|>",
            "<|im_start|>user\\n<tool_response>\\nThe river level of Brennwick is 3 metres.\\n</tool_response><|im_end|>",
            "<|im_start|>assistant\\nAnswer: The river level of Brennwick is 3 metres<|im_end|>",
            "```",
            "",
            "4-20 tools per prompt (31 subjects x 8 verbs; tool names, like entity names, belong to one split by a "
            "hash), questions that need one call with the argument in the question (`tool_direct`, some with an "
            "integer year) or in a document of the user turn (`tool_doc`), two calls (`tool_two`), or none "
            "(`no_tool`: the documents answer it). Held-out scores per serving mode: `hypic eval --tasks tools` "
            "(docs/QUALITY.md); its records are `eval/tools_heldout.jsonl`."
            + (" The reply restates what it looks up before its calls (Qwen3.5's format allows text before the "
               "calls; the server returns it as the message's `content`)." if stages[-1].get("tools_preface") else "")
            + (" Training wrote each tool's JSON in either key order (`name` or `description` first), as clients "
               "send them." if stages[-1].get("tools_layout") == "mixed" else ""),
            "",
        ]
    lines += [
        "## Training",
        "",
        "Reproduce everything (data, tokenizer, training, this export) with `tools/tiny/run.sh`; see "
        "`tools/tiny/README.md`.",
        "",
        f"* From scratch on a CPU, {targs.get('threads', 1)} thread(s), bf16 autocast "
        f"{'off' if targs.get('no_amp') else 'on'}, torch {torch.__version__}; the Gated DeltaNet layers ran "
        "`tools/tiny/fast_gdn.py` (same maths as transformers' `torch_chunk_gated_delta_rule`, checked "
        "against it; the checkpoint is a standard one).",
        f"* {sum(s['steps'] for s in stages)} optimizer steps in {len(stages)} stage(s), "
        f"{sum(s['tokens'] for s in stages) / 1e6:.1f} M tokens, {sum(s['cpu_h'] for s in stages):.2f} CPU hours "
        "in training steps (evaluations and restarts not counted):",
        *[f"  {k + 1}. {s['steps']} steps, {s['tokens'] / 1e6:.1f} M tokens, {s['cpu_h']:.2f} CPU h, data format "
          f"`{s['format']}`, peak lr {s['lr']}"
          + (f", from the previous stage's weights, curriculum from {int(100 * s['curriculum_start'])} %"
             if s["from"] else ", from scratch")
          + (f", {int(100 * s['tools_share'])} % of the conversations tool-use tasks" if s.get("tools_share") else "")
          + "."
          for k, s in enumerate(stages)],
        ("* Initialisation: a hand-wired context-lookup circuit (`train.context_lookup_init`): GDN layers 1 "
         "and 2 write leaky summaries of the tokens up to t and before t into two residual subspaces "
         "(constant key from a shared embedding component), attention layer 3 matches the first against the "
         "second and copies the matched token; every other residual branch starts at zero. At step 0 it "
         "already picks the first value token of most held-out single-hop answers; all of it is trained."
         if init["context_lookup_init"] else
         f"* Initialisation: flash-linear-attention's for the GDN decay and conv; GDN layers "
         f"{init['induction_init']} as induction heads (query = current token, key = previous token through "
         "the conv taps, shared projection, long memory; `train.induction_init`)."
         if init["induction_init"] else "* Initialisation: flash-linear-attention's for the GDN decay and conv."),
        f"* AdamW (betas 0.9/0.95, weight decay {targs.get('weight_decay')}), peak lr {targs.get('lr')}, "
        f"{targs.get('warmup')} warm-up steps, cosine to {targs.get('min_lr_ratio')} x peak, gradient clip "
        f"{targs.get('clip')}, <= {targs.get('tokens_per_step')} padded tokens per step.",
        "* Curriculum over prompt lengths: " + "; ".join(
            f"from {int(100 * s)} % of the steps " + ", ".join(f"{p} {int(100 * w)} %" for p, w in m.items())
            for s, m in T.PHASES) + " (micro: 2-3 documents of 20-90 tokens, mostly facts; short: 2-4 of 40-220; medium: 3-6 of "
        "80-600; long: 3-8 of 100-1500, 1-4k tokens).",
        "* Each training conversation is the engine layout above followed by a few follow-up turns "
        "(another `Question:` about the same documents and its answer) for more supervised answers per "
        "forward pass; the first turn is always exactly the evaluation layout.",
        f"* Loss: mean cross-entropy on the reply tokens of every turn + {targs.get('ctx_weight')} x mean "
        "cross-entropy on the document and question tokens (language-model signal that teaches reading and "
        "copying names); nothing on the template tokens.",
        "",
    ]
    if last:
        lines += [f"Last logged: step {last['step']}, reply loss {last['reply_loss']:.3f}, context loss "
                  f"{last['ctx_loss']:.3f}, {last['tok_s']:.0f} tokens/s.", ""]
    if evals:
        profs = [k for k in evals[-1] if k != "step"]
        lines += ["Held-out accuracy during training (greedy, small samples, bf16 autocast; `eval` = the target "
                  "lengths), single / two_hop / aggregate:", "",
                  "| step | " + " | ".join(profs) + " |", "|---" * (len(profs) + 1) + "|"]
        for e in evals[-16:]:
            lines.append(f"| {e['step']} | " + " | ".join(
                " / ".join(f"{e.get(p, {}).get(t, 0):.2f}" for t in gen_data.TASKS) for p in profs) + " |")
        lines.append("")
    lines += [
        "## Limitations",
        "",
        "A tiny model trained for a few CPU hours on synthetic data: it reads documents in this format and "
        "answers these question types; it is not a general language model and will produce nonsense for "
        "anything else.",
        "",
    ]
    if ev and ev.get("per_task", {}).get("single", 1.0) < 0.9:
        lines += [
            "**Not yet at the project's target** (single-hop >= 90 % in full mode): it copies fragments of "
            "names from the documents but often from the wrong place. What was tried and what comes next: "
            "`tools/tiny/README.md`.",
            "",
        ]
    weak = [t for t in gen_data.TASKS[1:] if ev and ev.get("per_task", {}).get(t, 1.0) < 0.5]
    if weak:
        why = (" Listing or counting the entities that share a value needs a reverse lookup (from a value to the "
               "entity named before it), which the model's lookup circuit does not provide; see"
               if "aggregate" in weak else " See")
        lines += ["**Below the project's 50 % aim** on " + " and ".join(
            f"{t} ({100 * ev['per_task'][t]:.0f} %)" for t in weak) + "." + why + " `tools/tiny/README.md`.", ""]
    lines += [
        f"Exported {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d')} by `tools/tiny/export.py`.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-dir", default=T.DEFAULT_RUN)
    ap.add_argument("--ckpt", default=None, help="default: the newest checkpoint of the run")
    ap.add_argument("--out", default=os.path.join(REPO, "models", "hypic-tiny"))
    ap.add_argument("--eval-per-task", type=int, default=100)
    ap.add_argument("--eval-dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import transformers
    from transformers import GenerationConfig
    transformers.utils.logging.disable_progress_bar()

    ck = a.ckpt or T.latest_checkpoint(a.run_dir)
    assert ck, f"no checkpoint in {a.run_dir}"
    c = torch.load(ck, map_location="cpu", weights_only=False)
    gen_data.set_format(c["args"].get("data_format", "varied"))  # runs before session 4: varied
    tok_path = c["args"].get("tokenizer") or os.path.join(a.run_dir, "tokenizer.json")
    tok = T.load_tokenizer(tok_path)
    model = T.build_model(tok)
    model.load_state_dict(extend_vocab.materialize(c["model"], tok))  # --twin-offset: plain rows
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    eos, pad = tok.token_to_id(gen_data.EOS), tok.token_to_id(T.PAD)
    model.generation_config = GenerationConfig(bos_token_id=None, eos_token_id=eos, pad_token_id=pad,
                                               do_sample=False, max_new_tokens=64)
    if os.path.isdir(a.out):
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    model.save_pretrained(a.out)
    shutil.copyfile(tok_path, os.path.join(a.out, "tokenizer.json"))
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump(TT.tokenizer_config(tok), f, indent=2, ensure_ascii=False)
        f.write("\n")
    for x in os.listdir(a.out):
        os.chmod(os.path.join(a.out, x), 0o644)
    n_params = sum(p.numel() for p in model.parameters())
    cfg = json.load(open(os.path.join(a.out, "config.json")))
    print(f"exported {ck} (step {c['state']['step']}) -> {a.out}: {n_params / 1e6:.2f} M parameters, "
          f"model_type {cfg['model_type']}", flush=True)
    ev = None
    if a.eval_per_task > 0:
        print(f"held-out evaluation, {a.eval_per_task} prompts per task, {a.eval_dtype}:", flush=True)
        ev = evaluate_dir(a.out, a.eval_per_task, getattr(torch, a.eval_dtype))
        ev["checkpoint_step"] = c["state"]["step"]
        with open(os.path.join(a.out, "eval_results.json"), "w") as f:
            json.dump(ev, f, indent=2, ensure_ascii=False)
            f.write("\n")
    stages = stages_of(c)
    with open(os.path.join(a.out, "training_stages.json"), "w") as f:  # for a run that starts from this model
        json.dump(stages, f, indent=1)
        f.write("\n")
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write(model_card(cfg, n_params, c["state"], c["args"], ev, dir_bytes(a.out), stages))
    size = dir_bytes(a.out)
    print(f"{a.out}: {sorted(os.listdir(a.out))}, {size / 1e6:.1f} MB", flush=True)
    assert size <= MAX_BYTES, f"model directory is {size} bytes > {MAX_BYTES}"
    return 0


if __name__ == "__main__":
    sys.exit(main())
