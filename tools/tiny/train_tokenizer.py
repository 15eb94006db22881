#!/usr/bin/env python3
"""Train hypic-tiny's byte-level BPE tokenizer (Qwen2-style configuration) on generated text.

    python train_tokenizer.py --data train_sample.jsonl --out tokenizer.json [--vocab 6144]

Configuration (as Qwen2/Qwen3.5's tokenizer.json): NFC normalizer; pre-tokenizer
Sequence[Split(Qwen2 regex, isolated), ByteLevel(add_prefix_space=False, use_regex=False)];
BPE without unk / continuing-subword prefix; ByteLevel decoder; special tokens <|endoftext|>,
<|im_start|>, <|im_end|> appended after the BPE vocabulary (as Qwen does). The total vocabulary
is exactly --vocab. Training text: the full rendered conversations (system, documents, questions,
answers) of a sample of the *train* split only, so held-out names are never seen by the merges.
Deterministic: the same input gives a byte-identical tokenizer.json.

Also checks that every document segment tokenises identically alone and inside its prompt, and
prints the measured tokens per word so gen_data.TOKENS_PER_WORD can be calibrated.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_data  # noqa: E402

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def conversation_text(rec: dict) -> str:
    t = gen_data.render_prompt(rec) + gen_data.render_reply(rec["answer"])
    for f in rec.get("followups", []):
        t += gen_data.render_followup(f["question"]) + gen_data.render_reply(f["answer"])
    return t + "\n"


def build(texts, vocab: int) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    # the specials must not be split by BPE training: strip them from the training text
    trainer = trainers.BpeTrainer(vocab_size=vocab - len(SPECIAL_TOKENS), min_frequency=2, show_progress=False,
                                  special_tokens=[], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    def it():
        for t in texts:
            for s in SPECIAL_TOKENS:
                t = t.replace(s, "\n")
            yield t
    tok.train_from_iterator(it(), trainer=trainer)
    base = tok.get_vocab_size()
    tok.add_special_tokens(SPECIAL_TOKENS)
    assert tok.get_vocab_size() == base + len(SPECIAL_TOKENS)
    d = json.loads(tok.to_str())
    d["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return Tokenizer.from_str(json.dumps(d))


def tokenizer_config(tok: Tokenizer, max_len: int = 8192) -> dict:
    added = {}
    for s in SPECIAL_TOKENS:
        added[str(tok.token_to_id(s))] = {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True}
    return {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"], "bos_token": None,
        "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>",
        "errors": "replace", "model_max_length": max_len, "pad_token": "<|endoftext|>",
        "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }


def check_segments(tok: Tokenizer, recs: list[dict]) -> None:
    """prefix + segments + suffix tokenised separately == the whole prompt tokenised at once."""
    for rec in recs:
        parts = [gen_data.PREFIX] + [gen_data.render_segment(d) for d in rec["documents"]] + \
                [gen_data.render_suffix(rec["question"])]
        sep = [i for p in parts for i in tok.encode(p).ids]
        whole = tok.encode("".join(parts)).ids
        assert sep == whole, rec["id"]
        assert tok.decode(whole, skip_special_tokens=False) == "".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="JSONL of train records (gen_data.py)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=6144)
    ap.add_argument("--check", help="JSONL of records for the segment-identity check (default: --data)")
    a = ap.parse_args()
    recs = [json.loads(line) for line in open(a.data)]
    assert all(r["split"] == "train" for r in recs), "train the tokenizer on the train split only"
    tok = build([conversation_text(r) for r in recs], a.vocab)
    assert tok.get_vocab_size() == a.vocab, tok.get_vocab_size()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tok.save(a.out)
    with open(os.path.join(os.path.dirname(os.path.abspath(a.out)), "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(tok), f, indent=2, ensure_ascii=False)
        f.write("\n")
    chk = [json.loads(line) for line in open(a.check)] if a.check else recs
    check_segments(tok, chk[:300])
    # calibration of gen_data.est_tokens
    real = est = 0
    for r in chk[:300]:
        for d in r["documents"]:
            real += len(tok.encode(gen_data.render_segment(d)).ids)
            est += gen_data.est_tokens(gen_data.render_segment(d))
    print(f"tokenizer: vocab {tok.get_vocab_size()} -> {a.out}; segment identity OK on {min(300, len(chk))} records; "
          f"real/estimated document tokens = {real / est:.3f} (est_tokens would be exact at "
          f"TOKENS_PER_WORD ~ {gen_data.TOKENS_PER_WORD * real / est:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
