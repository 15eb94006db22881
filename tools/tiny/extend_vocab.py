#!/usr/bin/env python3
"""Give hypic-tiny's tokenizer line-start twins of its capitalised word tokens, and the model their rows.

Why: the Qwen2 pre-tokenizer joins a word to the space before it, so a name inside a sentence is
` Dratei Cooperative` -> [ĠDrat, ei, ĠCooperative], while the same name at the start of a line -- where
the Qwen3.5 tool format puts every argument (`<parameter=company>\\nDratei Cooperative\\n`) -- is
[D, r, at, ei, ĠCooperative]: other tokens, and more of them. To call a tool the model must spell the
name it read; hypic-tiny reads by looking up what followed a matching context and cannot spell
(teacher-forced, the first argument token was right 5 % of the time, the name 98 %).

What it does: every merge whose left side is a capitalised space-word (`ĠD + r -> ĠDr`) gets a twin
without the space (`D + r -> Dr`) ranked right after it, so a capitalised word at a line start
tokenises exactly as after a space, minus the space (checked on 6,000 generated names of both splits).
The new tokens get ids after the specials (the specials keep theirs) and each new embedding row is a
copy of its space twin's: the model starts out reading both forms alike and learns where each goes.

    python extend_vocab.py --from RUN/ckpt/step_N.pt|MODEL_DIR --tokenizer tokenizer.json --out DIR

DIR gets tokenizer.json, model.safetensors (float32) and training_stages.json: what train.py
--init-from DIR --tokenizer DIR/tokenizer.json continues from.

Training (`train.py --twin-offset`): a twin's row is its space twin's row plus one offset shared by
all twins plus its own residual (TwinEmbedding, tied to the output as before). Left as free rows
the twins never learn where they go -- each is a reply's target a handful of times, and the model
went on writing the line-start letters it knew (`R`, `C`) -- while one shared offset is learnt from
every argument and then holds for names never seen. Checkpoints keep the residual form; export.py
writes plain rows (`materialize`), so the exported model is a standard checkpoint.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_data  # noqa: E402


def _cap_word(tok: str) -> bool:
    return tok.startswith("Ġ") and len(tok) > 1 and tok[1].isupper()


def extend(tj: dict) -> tuple[dict, list[tuple[str, str]]]:
    """tokenizer.json with the line-start twins; (new token, its space twin) in id order."""
    m = tj["model"]
    vocab = dict(m["vocab"])
    vocab.update({a["content"]: a["id"] for a in tj["added_tokens"]})  # specials keep their ids
    next_id = max(vocab.values()) + 1
    existing = {tuple(x) for x in m["merges"]}
    merges, emitted, added = [], set(), []
    for a, b in map(tuple, m["merges"]):
        if (a, b) in emitted:  # a twin moved up to its original's rank
            continue
        merges.append([a, b])
        emitted.add((a, b))
        twin = (a[1:], b)
        if not _cap_word(a) or twin in emitted or twin[0] not in vocab:
            continue
        if twin[0] + b not in vocab:
            vocab[twin[0] + b] = next_id
            next_id += 1
            added.append((twin[0] + b, a + b))
        merges.append(list(twin))  # an existing pair ranked later moves up here
        emitted.add(twin)
    assert emitted >= existing
    out = json.loads(json.dumps(tj))
    out["model"]["vocab"] = vocab  # the specials too: with ids after them, the BPE vocabulary must name theirs
    out["model"]["merges"] = merges
    return out, added


def check(tok, n: int = 3000) -> None:
    """Every generated name tokenises at a line start as after a space, minus the space."""
    for split in ("train", "heldout"):
        names = gen_data.Names(random.Random(f"extend_vocab/{split}"), split)
        for i in range(n):
            name = [names.person, names.town, names.company][i % 3]()
            sp = [tok.id_to_token(x) for x in tok.encode(" " + name).ids]
            ls = [tok.id_to_token(x) for x in tok.encode("\n" + name).ids][1:]
            assert ["Ġ" + ls[0]] + ls[1:] == sp, (name, sp, ls)


def twin_pairs(tok) -> tuple[list[int], list[int]]:
    """(twin ids, their space twins' ids): the tokens after the specials whose `Ġ` form is a token."""
    vocab = tok.get_vocab()
    first = max(tok.token_to_id(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")) + 1
    pairs = sorted((i, vocab["Ġ" + t]) for t, i in vocab.items() if i >= first and "Ġ" + t in vocab)
    return [a for a, _ in pairs], [b for _, b in pairs]


class TwinEmbedding(torch.nn.Embedding):
    """weight holds the twins' residuals; full_weight() the rows the model reads and writes with."""

    def __init__(self, base: torch.nn.Embedding, twins: list[int], spaces: list[int]):
        super().__init__(base.num_embeddings, base.embedding_dim, padding_idx=base.padding_idx, _weight=base.weight.data)
        self.register_buffer("twin_ids", torch.tensor(twins), persistent=False)
        self.register_buffer("space_ids", torch.tensor(spaces), persistent=False)
        self.twin_offset = torch.nn.Parameter(torch.zeros(base.embedding_dim))

    def full_weight(self) -> torch.Tensor:
        return self.weight.index_add(0, self.twin_ids, self.weight[self.space_ids] + self.twin_offset)

    def to_residual(self) -> None:
        """Plain rows (a model loaded from an exported directory) -> the residual form."""
        with torch.no_grad():
            self.weight[self.twin_ids] -= self.weight[self.space_ids] + self.twin_offset

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(ids, self.full_weight(), self.padding_idx)


class TiedHead(torch.nn.Module):
    def __init__(self, emb: TwinEmbedding):
        super().__init__()
        self.emb = [emb]  # not a submodule: the embedding's parameters stay registered once

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(h, self.emb[0].full_weight())


def tie_twins(model, tok) -> TwinEmbedding:
    """Replaces the model's embedding and output head by the twin-offset form (weights unchanged)."""
    twins, spaces = twin_pairs(tok)
    assert twins, "the tokenizer has no line-start twins (extend_vocab.py)"
    emb = TwinEmbedding(model.model.embed_tokens, twins, spaces)
    model.model.embed_tokens = emb
    model.lm_head = TiedHead(emb)
    return emb


def materialize(state: dict, tok) -> dict:
    """A --twin-offset checkpoint's weights as plain rows (a standard tied checkpoint)."""
    state = dict(state)
    offset = state.pop("model.embed_tokens.twin_offset", None)
    if offset is None:
        return state
    twins, spaces = (torch.tensor(x) for x in twin_pairs(tok))
    w = state["model.embed_tokens.weight"]
    w = w.index_add(0, twins, w[spaces] + offset)
    state["model.embed_tokens.weight"] = state["lm_head.weight"] = w
    return state


def load_weights(src: str) -> tuple[dict, list]:
    if os.path.isdir(src):
        from safetensors.torch import load_file
        w = {k: v.float() for k, v in load_file(os.path.join(src, "model.safetensors")).items()}
        path = os.path.join(src, "training_stages.json")
        return w, json.load(open(path)) if os.path.exists(path) else []
    import export
    c = torch.load(src, map_location="cpu", weights_only=False)
    return {k: v.float() for k, v in c["model"].items()}, export.stages_of(c)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="src", required=True, help="a train.py checkpoint or an exported model directory")
    ap.add_argument("--tokenizer", required=True, help="the tokenizer.json the weights were trained with")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from safetensors.torch import save_file
    from tokenizers import Tokenizer

    tj = json.load(open(a.tokenizer, encoding="utf-8"))
    new_tj, added = extend(tj)
    os.makedirs(a.out, exist_ok=True)
    tok_out = os.path.join(a.out, "tokenizer.json")
    with open(tok_out, "w", encoding="utf-8") as f:
        json.dump(new_tj, f, ensure_ascii=False, indent=1)
    old, tok = Tokenizer.from_file(a.tokenizer), Tokenizer.from_file(tok_out)
    for t in tj["added_tokens"]:
        assert tok.token_to_id(t["content"]) == t["id"], t
    check(tok)

    w, stages = load_weights(a.src)
    w.pop("lm_head.weight", None)  # tied
    emb = w["model.embed_tokens.weight"]
    assert emb.shape[0] == old.get_vocab_size(), (emb.shape, old.get_vocab_size())
    rows = torch.stack([emb[old.token_to_id(twin)] for _, twin in added])
    w["model.embed_tokens.weight"] = torch.cat([emb, rows]).contiguous()
    assert w["model.embed_tokens.weight"].shape[0] == tok.get_vocab_size()
    save_file(w, os.path.join(a.out, "model.safetensors"))
    if stages:
        stages[-1]["line_start_tokens"] = len(added)
    with open(os.path.join(a.out, "training_stages.json"), "w") as f:
        json.dump(stages, f, indent=1)
        f.write("\n")
    print(f"{a.out}: {len(added)} line-start tokens (vocabulary {old.get_vocab_size()} -> {tok.get_vocab_size()}), "
          f"e.g. {[t for t, _ in added[:8]]}; names tokenise alike at a line start (checked)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
