#!/usr/bin/env python3
"""Generate hypic's tiny test checkpoints and their golden outputs.

Dev-only: needs torch + transformers (pinned, see REQUIRED_TRANSFORMERS), tokenizers and
safetensors. CI never runs this; the files it writes are committed.

    /opt/hypic-dev/bin/python tools/make_golden.py            # writes tests/models/*  (~45 s)
    /opt/hypic-dev/bin/python tools/make_golden.py --out DIR  # somewhere else
    /opt/hypic-dev/bin/python tools/make_golden.py --check    # only re-verify the committed files
                                                              # with the plain-torch reference

What it does (all fp32, CPU, one thread, fully deterministic):
  1. trains one tiny Qwen2-style byte-level BPE tokenizer on the prose embedded below;
  2. builds three tiny random checkpoints with the real Hugging Face classes
     (qwen3_next_moe: Qwen3NextForCausalLM; qwen3_5_dense: Qwen3_5ForConditionalGeneration;
     qwen3_5_moe: Qwen3_5MoeForConditionalGeneration), every parameter randomised;
  3. for each, picks from a fixed list of seeds the one whose 16 greedy tokens are unambiguous
     (top-1 minus top-2 logit >= MIN_MARGIN, >= MIN_DISTINCT distinct ids, no special token),
     survive bf16 (HF model cast to bf16, and the fp32 model with bf16-rounded weights, both
     reproduce them) and have the largest min_i margin_i / bf16_deviation_i; saves it with
     save_pretrained (+ a few mtp.* tensors), reloads it from disk and writes golden.json +
     golden_logits.safetensors from the reloaded model;
  4. checks that the cached decode path (generate) and a plain prefill forward agree, and that an
     independent plain-torch re-implementation (reference_logits) reproduces the golden logits
     from the files alone.
"""
from __future__ import annotations

import argparse
import copy
import functools
import importlib.util
import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

torch.set_num_threads(1)
torch.set_num_interop_threads(1)
torch.use_deterministic_algorithms(True)

import transformers  # noqa: E402

transformers.utils.logging.disable_progress_bar()
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_report import name_patterns, print_layouts, print_report, tensor_layout  # noqa: E402,F401

REQUIRED_TRANSFORMERS = "5.23.0"
# A directory that needs a later release names it (make_golden_kda's ling3_lora_limits: 5.25.0, the first
# whose BailingHybrid reads q_lora_rank and the SwiGLU limits) and checks it itself.
LATER_TRANSFORMERS = ("5.25.0",)
assert transformers.__version__ in (REQUIRED_TRANSFORMERS,) + LATER_TRANSFORMERS, (
    f"make_golden.py is pinned to transformers=={REQUIRED_TRANSFORMERS}, found {transformers.__version__}"
)


def require_pinned_transformers():
    assert transformers.__version__ == REQUIRED_TRANSFORMERS, (
        f"these goldens are made with transformers=={REQUIRED_TRANSFORMERS}, found {transformers.__version__}")
# The reference must be HF's torch fallbacks (torch_chunk_gated_delta_rule, chunk 64; torch causal conv1d),
# never flash-linear-attention / causal-conv1d / hub kernels.
for _pkg in ("fla", "causal_conv1d", "kernels"):
    assert importlib.util.find_spec(_pkg) is None, f"{_pkg} is installed; golden data must use the torch fallbacks"

from transformers import (  # noqa: E402
    AutoTokenizer,
    Qwen3_5Config,
    Qwen3_5ForConditionalGeneration,
    Qwen3_5MoeConfig,
    Qwen3_5MoeForConditionalGeneration,
    Qwen3NextConfig,
    Qwen3NextForCausalLM,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ----------------------------------------------------------------------------------------------
# Text. Original prose written for this file: TRAIN_TEXT trains the tokenizer, PROMPT_TEXT is
# the golden prompt (partly unseen by the tokenizer trainer, so it also splits into pieces).
# ----------------------------------------------------------------------------------------------
TRAIN_TEXT = """\
The river town woke slowly. Fishermen pushed their boats into the grey water before the sun
had cleared the hills, and the baker on the corner was already pulling the first loaves from
the oven. By seven o'clock the square smelled of bread, diesel and wet stone.

Mara kept the lighthouse at the end of the northern pier. She'd inherited the job from her
uncle, who had inherited it from his mother, and she liked to say that the lamp had never
once gone dark in ninety-three years. That wasn't quite true: in the winter of 1987 a storm
cut the power for eleven minutes. But nobody who remembered that night was going to argue.

A computer is a machine that follows instructions. The instructions are written in a
program, and the program is stored in memory as a long sequence of numbers. When the
processor runs, it fetches one instruction, decodes it, executes it and moves on to the next.
Modern processors do many of these steps at the same time, and they guess which way a branch
will go before they know the answer. When they guess wrong, they throw the work away and
start again. It's a strange way to be fast, but it works remarkably well.

Recipe for a simple tomato soup (serves 4): soften 2 onions and 3 cloves of garlic in olive
oil; add 800 g of chopped tomatoes, 500 ml of stock, a pinch of sugar and salt; simmer for
20 minutes, then blend until smooth. Stir in a little cream if you like, and serve with
toast. Don't let it boil after the cream goes in, or it'll split!

"Are you coming?" asked Tom.
"In a minute," said his sister. "I'm looking for my other shoe."
"You've been looking for that shoe since Tuesday."
"And I'll keep looking until I find it. We're not leaving without it."

Language models read text as tokens. A tokenizer breaks each sentence into small pieces,
sometimes whole words and sometimes fragments such as "ing" or "tion". The model then
predicts the next piece, one step at a time, using everything it has seen so far. Attention
layers look back over the whole history, while recurrent layers carry a compact state
forward, updating it with every new token. Hybrid models mix the two: most layers keep a
fixed-size state, and every fourth layer looks at the full context.

In the spring the valley turns green almost overnight. Cherry trees bloom along the road,
lambs appear in the fields, and the school children count the storks that return to the
chimney of the old mill. Last year there were 14 of them; this year, 17. The café by the
bridge puts its tables outside again, and the owner, a cheerful man named José, writes the
daily specials on a blackboard in careful, looping letters: soup, quiche, apple tart.

Numbers are everywhere. There are 24 hours in a day, 60 minutes in an hour and 3600 seconds
in an hour. A year has 365 days, or 366 in a leap year. The speed of light is about 299792
kilometres per second. Water boils at 100 degrees Celsius at sea level, and freezes at 0.

The committee met on Thursday to review the budget. After a long discussion, they agreed to
repair the library roof, replace two of the old buses and plant forty new trees along the
main avenue. The mayor thanked everyone for their patience and promised that the work would
be finished before the autumn rains. Some people weren't convinced, but most went home happy.

Good software is tested. Each function should do one thing, and a test should check that it
does that thing correctly, even in the strange corner cases: an empty list, a very long
string, a number that is negative or zero. When a test fails, read the message carefully;
it usually tells you exactly what went wrong, if you're willing to listen.

She opened the letter with trembling hands. It was short, only three lines, but she read it
again and again until the words began to blur. Then she folded it, put it in her pocket and
walked down to the harbour, where the boats rocked gently and the gulls argued over scraps.
"""

PROMPT_TEXT = """\
The old clock in the hall struck nine, and the house fell quiet. Outside, the rain had
stopped, and a thin moon was rising over the hills behind the village. Anna sat at the
kitchen table with a cup of tea and a notebook, trying to decide what to write. Her
grandfather had kept a diary for sixty years, one page for every day, and she had promised
to continue it. But nothing had happened today, or nothing that seemed worth recording: she
had fed the hens, mended the gate, walked to the shop for milk and bread, and talked with
the neighbour about the weather. She smiled. Perhaps that was exactly what he had written
about, all those years. She picked up the pen and began: "Wednesday. Rain in the morning,
clear by evening. The hens are laying again, and the gate no longer squeaks. Mrs. Patel
says the river is higher than it has been since 1998, but the bridge is safe. I bought
two loaves, one for us and one for the ducks."
"""

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 512  # total, including the 3 special tokens appended at the end (like Qwen's ids)
MIN_PROMPT_TOKENS = 220
N_GREEDY = 16
MIN_MARGIN = 0.05
MIN_DISTINCT = 10  # reject degenerate (repeating) greedy continuations
SEED_CANDIDATES = 32  # seeds tried per model: base_seed + 0 .. base_seed + SEED_CANDIDATES - 1


def build_tokenizer() -> Tokenizer:
    """The shared Qwen test BPE (tools/family_tokenizers.py, family "qwen")."""
    return Tokenizer.from_str(_qwen_tokenizer()[0])


def tokenizer_config(tok: Tokenizer) -> dict:
    return copy.deepcopy(_qwen_tokenizer()[1])


@functools.lru_cache(maxsize=None)
def _qwen_tokenizer() -> tuple[str, dict]:
    import family_tokenizers
    return family_tokenizers.build("qwen", TRAIN_TEXT, VOCAB_SIZE)


def prompt_ids_from_text(tok: Tokenizer | TokInfo) -> tuple[str, list[int]]:
    """The shortest whole-word prefix of PROMPT_TEXT with >= MIN_PROMPT_TOKENS tokens (T % 64 != 0).

    tok: a `tokenizers.Tokenizer` or a TokInfo (any family, tokenizer.json or tiktoken)."""
    encode = tok.encode if isinstance(tok, TokInfo) else (lambda s: tok.encode(s).ids)
    cuts = [i for i in range(1, len(PROMPT_TEXT)) if PROMPT_TEXT[i].isspace() and not PROMPT_TEXT[i - 1].isspace()]
    for i in cuts:
        text = PROMPT_TEXT[:i]
        ids = encode(text)
        if len(ids) >= MIN_PROMPT_TOKENS and len(ids) % 64 != 0:
            return text, ids
    raise RuntimeError(f"PROMPT_TEXT too short: {len(encode(PROMPT_TEXT))} tokens")


# ----------------------------------------------------------------------------------------------
# Test tokenizers of the other families and directory helpers (make_golden_lightning.py, make_golden_kda.py)
# ----------------------------------------------------------------------------------------------
class TokInfo:
    """A tools/family_tokenizers.py test tokenizer of any family, as a model directory carries it.

    files: {file name: text} (family_tokenizers.model_files: tokenizer.json or the tiktoken rank file
    tiktoken.model, and tokenizer_config.json); enc: the family's reference encoder built from them
    (HF `tokenizers` for tokenizer.json, tiktoken with Kimi's regex and special ids for tiktoken.model);
    tok: the `tokenizers.Tokenizer` for tokenizer.json families, else None. eos / pad: ids of the
    config's eos_token / pad_token (pad = eos without one) unless `eos_token` / `pad_token` name
    others (the model config.json's choice); specials: the special ids (greedy ids must avoid them);
    vocab: the encoder's vocab_size (max id + 1: the embedding rows)."""

    def __init__(self, family: str, files: dict[str, str], source: str, eos_token: str | None = None,
                 pad_token: str | None = None):
        import family_tokenizers
        self.family, self.source = family, source
        self.files = dict(files)
        self.main_file = family_tokenizers.MODEL_FILE[family]
        main = files[self.main_file]
        self.cfg = json.loads(files["tokenizer_config.json"])
        self.enc = family_tokenizers.reference_encoder(family, main, self.cfg)
        self.tok = Tokenizer.from_str(main) if self.main_file == "tokenizer.json" else None
        self.specials = set(self.enc.special_ids)

        def content(x):
            return x.get("content") if isinstance(x, dict) else x
        eos = eos_token or content(self.cfg.get("eos_token"))
        pad = pad_token or content(self.cfg.get("pad_token"))
        self.eos = self.enc.token_to_id(eos)
        self.pad = self.enc.token_to_id(pad) if pad is not None else self.eos
        assert self.eos is not None, f"eos token {eos!r} not in the vocabulary"
        assert self.pad is not None, f"pad token {pad!r} not in the vocabulary"
        self.eos_token, self.pad_token = eos, pad
        self.vocab = self.enc.vocab_size

    def encode(self, text: str) -> list[int]:
        """Ids of `text`, special tokens parsed (no bos / eos added)."""
        return self.enc.encode(text, parse_special=True)

    def decode(self, ids: list[int]) -> str:
        return self.enc.decode(ids, skip_special=False)


def tokenizer_for(family: str, vocab_size: int = VOCAB_SIZE, eos_token: str | None = None,
                  pad_token: str | None = None) -> TokInfo:
    """family: a tools/family_tokenizers.py family ("bailing", "minimax", "kimi", ...): its test BPE.
    vocab_size: build()'s argument (kimi counts its 258 special ids in it: above 514)."""
    import family_tokenizers
    files = family_tokenizers.model_files(family, TRAIN_TEXT, vocab_size)
    source = f"tools/family_tokenizers.py build({family!r})" if vocab_size == VOCAB_SIZE else \
        f"tools/family_tokenizers.py build({family!r}, vocab_size={vocab_size})"
    return TokInfo(family, files, source, eos_token, pad_token)


TOKENIZER_FILES = ("tokenizer.json", "tiktoken.model")


def clear_dir(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    for fn in os.listdir(out_dir):
        if fn.endswith((".safetensors", ".json", ".jinja")) or fn in TOKENIZER_FILES:
            os.remove(os.path.join(out_dir, fn))


def write_tokenizer(t: TokInfo, out_dir: str) -> None:
    """t.files into out_dir; tokenizer.json as `tokenizers` saves it (pretty-printed)."""
    for fn, text in t.files.items():
        path = os.path.join(out_dir, fn)
        if fn == "tokenizer.json":
            t.tok.save(path)
        else:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)


def check_dir_tokenizer(t: TokInfo, out_dir: str, prompt_text: str, prompt: list[int]) -> None:
    """The tokenizer files in out_dir, read back, must encode prompt_text to `prompt`: for tokenizer.json
    families as transformers' AutoTokenizer loads the directory; for tiktoken families (Kimi: its
    tokenizer_config.json names remote code, tokenization_kimi.py, that a test checkpoint does not ship)
    the family's reference encoder built from the files on disk."""
    import family_tokenizers
    with open(os.path.join(out_dir, t.main_file), encoding="utf-8", newline="") as f:
        main = f.read()
    with open(os.path.join(out_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    if t.main_file == "tokenizer.json":
        import warnings
        with warnings.catch_warnings():  # transformers warns about Ring's `rope_scaling: null` key
            warnings.simplefilter("ignore", FutureWarning)
            hf_tok = AutoTokenizer.from_pretrained(out_dir)
        assert hf_tok(prompt_text)["input_ids"] == prompt, "AutoTokenizer disagrees with tokenizer.json"
    else:
        enc = family_tokenizers.reference_encoder(t.family, main, cfg)
        assert enc.encode(prompt_text, parse_special=True) == prompt, f"{t.main_file} read back disagrees"
        assert enc.vocab_size == t.vocab and enc.token_to_id(t.eos_token) == t.eos


# ----------------------------------------------------------------------------------------------
# Model configs
# ----------------------------------------------------------------------------------------------
COMMON_TEXT = dict(
    hidden_size=64,
    num_hidden_layers=8,          # layer_types: 3 x linear_attention + 1 x full_attention, twice
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,                  # partial_rotary_factor 0.25 -> 16 rotary dims (pairs j, j+8)
    linear_conv_kernel_dim=4,
    linear_key_head_dim=32,
    linear_value_head_dim=32,
    rms_norm_eps=1e-6,
    hidden_act="silu",
    max_position_embeddings=4096,
    attention_bias=False,
    initializer_range=0.02,
)
FULL_ATTENTION_INTERVAL = 4


def next_config(vocab: int, eos: int, pad: int) -> Qwen3NextConfig:
    return Qwen3NextConfig(
        vocab_size=vocab,
        **COMMON_TEXT,
        linear_num_key_heads=2,
        linear_num_value_heads=4,  # nv != nk: value head h uses key head h // 2
        intermediate_size=64,      # unused (every layer is MoE), kept small
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=32,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        full_attention_interval=FULL_ATTENTION_INTERVAL,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
        tie_word_embeddings=False,
        eos_token_id=eos,
        pad_token_id=pad,
        bos_token_id=None,
        dtype="float32",
    )


TINY_VISION = dict(
    depth=1, hidden_size=16, intermediate_size=32, num_heads=2, in_channels=3, patch_size=2,
    spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=4,
)
QWEN35_ROPE = {
    "rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
    # text-only: all three M-RoPE sections see the same position, so this is plain partial RoPE
    "mrope_section": [3, 3, 2], "mrope_interleaved": True,
}


def qwen35_dense_config(vocab: int, eos: int, pad: int) -> Qwen3_5Config:
    text = dict(
        vocab_size=vocab,
        **COMMON_TEXT,
        linear_num_key_heads=2,
        linear_num_value_heads=2,  # nk == nv
        intermediate_size=96,
        full_attention_interval=FULL_ATTENTION_INTERVAL,
        rope_parameters=dict(QWEN35_ROPE),
        tie_word_embeddings=True,
        eos_token_id=eos,
        pad_token_id=pad,
        bos_token_id=None,
        dtype="float32",
    )
    return Qwen3_5Config(text_config=text, vision_config=dict(TINY_VISION), tie_word_embeddings=True,
                         dtype="float32")


def qwen35_moe_config(vocab: int, eos: int, pad: int) -> Qwen3_5MoeConfig:
    text = dict(
        vocab_size=vocab,
        **COMMON_TEXT,
        linear_num_key_heads=2,
        linear_num_value_heads=4,  # nv != nk
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=32,
        full_attention_interval=FULL_ATTENTION_INTERVAL,
        rope_parameters=dict(QWEN35_ROPE),
        tie_word_embeddings=False,
        eos_token_id=eos,
        pad_token_id=pad,
        bos_token_id=None,
        dtype="float32",
    )
    return Qwen3_5MoeConfig(text_config=text, vision_config=dict(TINY_VISION), tie_word_embeddings=False,
                            dtype="float32")


# ----------------------------------------------------------------------------------------------
# Randomisation: every text parameter gets a meaningful random value (not HF's default init)
# ----------------------------------------------------------------------------------------------
# Init scales. Every text parameter is drawn fresh (HF's default init would leave norms at 0/1,
# dt_bias at 1, etc.). Linear weights are N(0, gain^2 / fan_in).
#
# Why the gains are what they are: the golden greedy tokens must also come out of a bf16 engine.
# bf16 moves a random 8-layer model's logits by ~1-5 % of their spread, and random MoE routing is
# discontinuous (a top-2 near-tie flips under rounding), so with "natural" gains (read = write = 1)
# the HF model cast to bf16 already picks a different argmax at 5-35 % of positions. Sublayers that
# write less into the residual stream (write 0.3) keep that error near 1 %. The tied-embedding
# dense model additionally needs a small embedding (else tied logits just copy the current token),
# a strong first layer to dominate the residual, and a final norm with (1 + w) ~ 2 to restore the
# logit scale. Every sublayer still moves the logits by >= 2 % of their spread (see README).
GAINS = dict(
    embed=0.5, lm_head=0.5,
    norm=0.2,                # zero-centred RMSNorm weights ~ N(0, 0.2^2): y = x_hat * (1 + w)
    gdn_norm=0.2,            # GDN gated RMSNorm weight ~ N(1, 0.2^2), used as is
    conv=0.5,                # depthwise conv1d taps
    router=2.0, shared_gate=1.5,
    read=1.0,                # projections that read the (normed) residual stream
    write=1.0,               # projections that write into it: o_proj, out_proj, down_proj, experts.down_proj
    attn_write_mult=2.0,     # extra gain on o_proj (the sigmoid output gate halves attention's output)
    first_layer_write=None,  # write gain of layer 0 (None: same as write)
    final_norm_mean=0.0,     # mean of the final norm's w: (1 + w) scales the logits
    a_log=(-5.3, 0.4),       # A_log ~ U: A = exp(A_log) in [0.005, 1.5] (long- and short-memory heads)
    dt_bias=(-4.0, 1.0),     # dt_bias ~ U
)


@torch.no_grad()
def randomise(model: torch.nn.Module, seed: int, gains: dict | None = None) -> None:
    G = dict(GAINS, **(gains or {}))
    g = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=g, dtype=torch.float32) * std + mean

    def uniform(shape, lo, hi):
        return torch.rand(shape, generator=g, dtype=torch.float32) * (hi - lo) + lo

    for name, p in model.named_parameters():
        if ".visual." in name or name.startswith("model.visual"):
            continue  # vision tower: HF's (seeded) default init; hypic skips it
        shape = p.shape
        leaf = name.split(".")[-1]
        if name.endswith("embed_tokens.weight"):
            v = normal(shape, G["embed"])
        elif name == "lm_head.weight":
            v = normal(shape, G["lm_head"])
        elif name.endswith("linear_attn.norm.weight"):
            v = normal(shape, G["gdn_norm"], mean=1.0)  # gated RMSNorm: weight used as is, around 1
        elif name in ("model.norm.weight", "model.language_model.norm.weight"):
            v = normal(shape, G["norm"], mean=G["final_norm_mean"])  # final norm: (1 + w) scales logits
        elif leaf == "weight" and ("layernorm" in name or name.endswith("norm.weight")):
            v = normal(shape, G["norm"])                # zero-centred RMSNorm: y = x_hat * (1 + w)
        elif leaf == "A_log":
            v = uniform(shape, *G["a_log"])             # A = exp(A_log): long- and short-memory heads
        elif leaf == "dt_bias":
            v = uniform(shape, *G["dt_bias"])
        elif name.endswith("conv1d.weight"):
            v = normal(shape, G["conv"])                # [conv_dim, 1, 4]
        elif name.endswith("mlp.gate.weight"):
            v = normal(shape, G["router"] / shape[-1] ** 0.5)  # router [E, H]
        elif name.endswith("shared_expert_gate.weight"):
            v = normal(shape, G["shared_gate"] / shape[-1] ** 0.5)
        elif name.endswith("experts.gate_up_proj"):
            v = normal(shape, G["read"] / shape[-1] ** 0.5)   # [E, 2I, H]
        elif name.endswith("experts.down_proj"):
            v = normal(shape, G["write"] / shape[-1] ** 0.5)  # [E, H, I]
        elif leaf == "weight" and p.dim() == 2:
            writes = name.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight"))
            gain = G["write"] if writes else G["read"]
            if writes and ".layers.0." in name and G["first_layer_write"] is not None:
                gain = G["first_layer_write"]
            if name.endswith("self_attn.o_proj.weight"):
                gain *= G["attn_write_mult"]
            v = normal(shape, gain / shape[-1] ** 0.5)  # nn.Linear [out, in]
        else:
            raise RuntimeError(f"randomise: no rule for {name} {tuple(shape)}")
        p.copy_(v)


def mtp_extras(hidden: int, seed: int) -> dict[str, torch.Tensor]:
    """A few `mtp.*` tensors like real Qwen3-Next / Qwen3.5 checkpoints carry (HF and hypic skip them)."""
    g = torch.Generator().manual_seed(seed + 7919)
    return {
        "mtp.fc.weight": torch.randn(hidden, 2 * hidden, generator=g) / (2 * hidden) ** 0.5,
        "mtp.pre_fc_norm_embedding.weight": torch.randn(hidden, generator=g) * 0.2,
        "mtp.pre_fc_norm_hidden.weight": torch.randn(hidden, generator=g) * 0.2,
        "mtp.layers.0.input_layernorm.weight": torch.randn(hidden, generator=g) * 0.2,
        "mtp.layers.0.post_attention_layernorm.weight": torch.randn(hidden, generator=g) * 0.2,
        "mtp.norm.weight": torch.randn(hidden, generator=g) * 0.2,
    }


# ----------------------------------------------------------------------------------------------
# Running the reference
# ----------------------------------------------------------------------------------------------
@torch.no_grad()
def prefill_logits(model, ids: list[int]) -> torch.Tensor:
    out = model(input_ids=torch.tensor([ids]), use_cache=False)
    return out.logits[0].float()


@torch.no_grad()
def greedy(model, ids: list[int]) -> tuple[list[int], torch.Tensor]:
    out = model.generate(
        input_ids=torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        do_sample=False,
        max_new_tokens=N_GREEDY,
        min_new_tokens=None,
        output_logits=True,
        return_dict_in_generate=True,
        use_cache=True,
        pad_token_id=model.generation_config.pad_token_id,
    )
    new = out.sequences[0, len(ids):].tolist()
    logits = torch.stack([l[0] for l in out.logits]).float()
    return new, logits


def margins(logits: torch.Tensor) -> torch.Tensor:
    top2 = logits.topk(2, dim=-1).values
    return top2[:, 0] - top2[:, 1]


def round_weights_to_bf16(model):
    m = copy.deepcopy(model)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return m


def evaluate(model, prompt: list[int], specials: set[int], greedy_fn=None, prefill_fn=None) -> dict:
    """fp32 greedy + how robust it is to bf16 (HF model cast to bf16; fp32 model with bf16-rounded weights).

    greedy_fn(model, ids) -> (new ids, logits) and prefill_fn(model, ids) -> logits default to the HF runners
    (greedy, prefill_logits); tools/make_golden_lightning.py passes its own for its plain-torch Ring model."""
    greedy_fn = greedy_fn or greedy
    prefill_fn = prefill_fn or prefill_logits
    new, dec = greedy_fn(model, prompt)
    m = margins(dec)
    res = {"greedy": new, "decode_logits": dec, "margins": m, "min_margin": float(m.min()),
           "bf16_match": False, "wround_match": False, "robustness": 0.0}
    res["ok"] = (len(new) == N_GREEDY and not specials & set(new) and new == dec.argmax(-1).tolist()
                 and len(set(new)) >= MIN_DISTINCT and res["min_margin"] >= MIN_MARGIN)
    if not res["ok"]:
        return res
    mb = copy.deepcopy(model).to(torch.bfloat16)
    mw = round_weights_to_bf16(model)
    res["bf16_match"] = greedy_fn(mb, prompt)[0] == new
    res["wround_match"] = greedy_fn(mw, prompt)[0] == new
    # teacher-forced logits on prompt + greedy: how far bf16 moves the logits at each greedy step
    seq, T = prompt + new[:-1], len(prompt)
    l32 = prefill_fn(model, seq)[T - 1:]
    res["dev_bf16"] = (prefill_fn(mb, seq)[T - 1:] - l32).abs().max(-1).values
    res["dev_wround"] = (prefill_fn(mw, seq)[T - 1:] - l32).abs().max(-1).values
    res["robustness"] = float((m / res["dev_bf16"]).min())
    res["ok"] = res["bf16_match"] and res["wround_match"]
    return res


def save_with_extras(model, out_dir: str, extras: dict[str, torch.Tensor], save_kw: dict) -> None:
    model.save_pretrained(out_dir, **save_kw)
    # Append the extra (mtp.*) tensors to the last shard, like real checkpoints carry them.
    index_path = os.path.join(out_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
        shard = sorted(set(index["weight_map"].values()))[-1]
    else:
        index, shard = None, "model.safetensors"
    path = os.path.join(out_dir, shard)
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    for k, v in extras.items():
        assert k not in tensors
        tensors[k] = v.to(torch.float32).contiguous()
    save_file(tensors, path, metadata=meta)
    if index is not None:
        for k, v in extras.items():
            index["weight_map"][k] = shard
            index["metadata"]["total_size"] = index["metadata"].get("total_size", 0) + v.numel() * 4
            if "total_parameters" in index["metadata"]:
                index["metadata"]["total_parameters"] += v.numel()
        index["weight_map"] = dict(sorted(index["weight_map"].items()))
        with open(index_path, "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")


# MoE models: random top-k routing is discontinuous, so bf16 rounding flips expert choices for a
# few tokens; smaller read/write gains keep those flips from swamping the logits (see README).
MOE_GAINS = {"read": 0.6, "write": 0.3, "router": 5.0}
DENSE_GAINS = {"read": 0.6, "write": 0.3, "embed": 0.1, "first_layer_write": 3.0, "final_norm_mean": 1.0}


# save_pretrained options. transformers 5.23 reverts its internal packed-expert layout to per-expert
# tensors on save for both MoE families (conversion_mapping: qwen3_next and qwen3_5_moe_text include
# the qwen2_moe converter). Real Qwen3-Next checkpoints are per-expert, so that is kept; real
# Qwen3.5-MoE checkpoints store packed experts (experts.gate_up_proj [E, 2I, H], experts.down_proj
# [E, H, I]), so that one is saved with save_original_format=False, i.e. HF's in-memory names.
# qwen3_5_moe is also sharded (model-0000N-of-0000M.safetensors + index.json) like real checkpoints.
MODELS = [
    # name, class, config fn, base seed, gains, save_pretrained kwargs
    ("qwen3_next_moe", Qwen3NextForCausalLM, next_config, 1000, MOE_GAINS, {}),
    ("qwen3_5_dense", Qwen3_5ForConditionalGeneration, qwen35_dense_config, 2000, DENSE_GAINS, {}),
    ("qwen3_5_moe", Qwen3_5MoeForConditionalGeneration, qwen35_moe_config, 3000, MOE_GAINS,
     {"save_original_format": False, "max_shard_size": "1MB"}),
]


def build(cls, cfg, seed: int, gains: dict | None = None):
    torch.manual_seed(seed)
    model = cls(cfg)
    randomise(model, seed, gains)
    model.eval()
    return model


def pick_seed(name, seeds, build_fn, evaluate_fn) -> int:
    """Deterministic seed choice: among the candidate seeds whose greedy tokens are unambiguous
    and survive bf16 (evaluate()'s "ok"), the one with the largest min_i margin_i / bf16 dev_i."""
    best = None
    for seed in seeds:
        model = build_fn(seed)
        r = evaluate_fn(model)
        print(f"  [{name}] seed {seed}: min margin {r['min_margin']:.4f} distinct {len(set(r['greedy']))} "
              f"bf16 match {r['bf16_match']} w-rounded match {r['wround_match']} "
              f"min margin/bf16-dev {r['robustness']:.3f} ok={r['ok']}", flush=True)
        if r["ok"] and (best is None or r["robustness"] > best[1]):
            best = (seed, r["robustness"])
        del model
    if best is None:
        raise RuntimeError(f"{name}: no seed gave unambiguous, bf16-stable greedy tokens")
    return best[0]


def make_model(name, cls, cfg_fn, base_seed, gains, save_kw, tok: Tokenizer, tok_cfg: dict, prompt_text: str,
               prompt: list[int], out_root: str, n_seeds: int) -> dict:
    vocab = tok.get_vocab_size()
    eos = tok.token_to_id("<|im_end|>")
    pad = tok.token_to_id("<|endoftext|>")
    specials = {tok.token_to_id(t) for t in SPECIAL_TOKENS}  # greedy ids must be plain text tokens

    def cfg():
        c = cfg_fn(vocab, eos, pad)
        for sub in {id(c): c, id(c.get_text_config()): c.get_text_config()}.values():
            sub._attn_implementation = "eager"
            sub._experts_implementation = "eager"  # the plain per-expert loop (HF's default is grouped_mm)
        return c

    # 1. seed search
    seed = pick_seed(name, range(base_seed, base_seed + n_seeds),
                     lambda s: build(cls, cfg(), s, gains), lambda m: evaluate(m, prompt, specials))

    # 2. build, save, reload
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    for fn in os.listdir(out_dir):
        if fn.endswith((".safetensors", ".json", ".jinja")):
            os.remove(os.path.join(out_dir, fn))
    model = build(cls, cfg(), seed, gains)
    ref_prefill = prefill_logits(model, prompt)
    hidden = model.config.get_text_config().hidden_size
    save_with_extras(model, out_dir, mtp_extras(hidden, seed), save_kw)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tok_cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")
    del model

    model = cls.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager",
                                experts_implementation="eager")
    model.eval()
    with torch.no_grad():  # mmap'd safetensors are not 64-byte aligned; BLAS rounding depends on alignment
        for p in model.parameters():
            p.data = p.data.clone()
    impl = model.config.get_text_config()
    assert impl._attn_implementation == "eager", impl._attn_implementation
    assert getattr(impl, "_experts_implementation", "eager") in ("eager", None), impl._experts_implementation
    for n, p in model.named_parameters():
        assert p.dtype == torch.float32, n

    # 3. golden data from the reloaded model
    prompt_logits = prefill_logits(model, prompt)
    reload_diff = float((prompt_logits - ref_prefill).abs().max())
    assert reload_diff == 0.0, f"{name}: reloaded model differs from the built one ({reload_diff})"
    r = evaluate(model, prompt, specials)
    assert r["ok"], name
    greedy_ids, decode_logits = r["greedy"], r["decode_logits"]
    m = margins(decode_logits)

    # 4. decode path (KV + recurrent cache, torch_recurrent_gated_delta_rule) vs one prefill forward
    full = prefill_logits(model, prompt + greedy_ids[:-1])
    T = len(prompt)
    dec_vs_prefill = float((full[T - 1:] - decode_logits).abs().max())
    prompt_vs_long = float((full[:T] - prompt_logits).abs().max())
    print(f"  [{name}] seed {seed}: min margin {float(m.min()):.4f}; decode vs prefill max|diff| "
          f"{dec_vs_prefill:.3e}; prompt logits (T) vs (T+15) prefill {prompt_vs_long:.3e}", flush=True)

    save_file({"prompt_logits": prompt_logits.contiguous(), "decode_logits": decode_logits.contiguous()},
              os.path.join(out_dir, "golden_logits.safetensors"),
              metadata={"format": "pt"})
    tc = model.config.get_text_config()
    golden = {
        "prompt_ids": prompt,
        "greedy_ids": greedy_ids,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "seed": seed,
        "min_margin": round(float(m.min()), 6),
        "margins": [round(float(x), 6) for x in m],
        "decode_vs_prefill_max_abs_diff": dec_vs_prefill,
        "bf16": {
            "hf_bf16_greedy_matches": r["bf16_match"],
            "bf16_rounded_weights_greedy_matches": r["wround_match"],
            "hf_bf16_max_abs_logit_dev": [round(float(x), 4) for x in r["dev_bf16"]],
            "bf16_rounded_weights_max_abs_logit_dev": [round(float(x), 4) for x in r["dev_wround"]],
            "min_margin_over_hf_bf16_dev": round(r["robustness"], 4),
        },
        "init_gains": dict(GAINS, **gains),
        "prompt_text": prompt_text,
        "greedy_text": tok.decode(greedy_ids, skip_special_tokens=False),
        "notes": (
            f"{cls.__name__}, fp32 on CPU, eval, no grad, attn_implementation=eager, "
            "experts_implementation=eager (MoE), HF torch fallbacks "
            "(torch_chunk_gated_delta_rule chunk 64 for prefill, torch_recurrent_gated_delta_rule for "
            "cached decode). prompt_logits: one prefill forward over prompt_ids, logits at every position "
            "[T, V]. decode_logits: generate(do_sample=False, output_logits=True) - row i produced greedy_ids[i] "
            "(row 0 comes from the prefill, rows 1.. from the cached decode path). "
            "bf16: the same HF model cast to bf16 (and, separately, this fp32 model with weights rounded to "
            "bf16) reproduces the 16 greedy ids; *_max_abs_logit_dev[i] = max_v |logit_bf16 - logit_fp32| at "
            "greedy step i, teacher-forced on prompt_ids + greedy_ids. "
            f"vocab {tc.vocab_size}, layer_types {tc.layer_types}. "
            "Generated by tools/make_golden.py; do not edit."
        ),
    }
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")
    del model
    for fn in os.listdir(out_dir):
        os.chmod(os.path.join(out_dir, fn), 0o644)
    size = sum(os.path.getsize(os.path.join(out_dir, fn)) for fn in os.listdir(out_dir))
    return {"name": name, "seed": seed, "min_margin": float(m.min()), "dec_vs_prefill": dec_vs_prefill,
            "size": size, "layout": tensor_layout(out_dir), "T": T}


# ----------------------------------------------------------------------------------------------
# Independent re-implementation (plain torch, no transformers modeling code) that reads only the
# files written above. It is the executable form of the semantics hypic must match; --check runs it.
# It uses the token-by-token recurrence for GDN, so it also cross-checks HF's chunked prefill.
# ----------------------------------------------------------------------------------------------
def load_checkpoint(model_dir: str) -> tuple[dict, dict[str, torch.Tensor]]:
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    files = sorted(fn for fn in os.listdir(model_dir) if fn.startswith("model") and fn.endswith(".safetensors"))
    W: dict[str, torch.Tensor] = {}
    for fn in files:
        with safe_open(os.path.join(model_dir, fn), framework="pt") as f:
            for k in f.keys():
                W[k] = f.get_tensor(k).float()
    return cfg, W


@torch.no_grad()
def reference_logits(model_dir: str, ids: list[int]) -> torch.Tensor:
    cfg, W = load_checkpoint(model_dir)
    tc = cfg.get("text_config", cfg)
    pre = "model.language_model." if any(k.startswith("model.language_model.") for k in W) else "model."
    H, eps, L = tc["hidden_size"], tc["rms_norm_eps"], tc["num_hidden_layers"]
    layer_types = tc.get("layer_types") or [
        "full_attention" if (i + 1) % tc.get("full_attention_interval", 4) == 0 else "linear_attention"
        for i in range(L)]
    rope = tc.get("rope_parameters") or {}
    theta = rope.get("rope_theta", tc.get("rope_theta"))
    prf = rope.get("partial_rotary_factor", tc.get("partial_rotary_factor", 1.0))
    T = len(ids)
    silu = torch.nn.functional.silu

    def rms_1p(x, w):  # zero-centred RMSNorm
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)

    def gdn(h, p):
        nk, nv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
        dk, dv, K = tc["linear_key_head_dim"], tc["linear_value_head_dim"], tc["linear_conv_kernel_dim"]
        r = nv // nk
        if p + "in_proj_qkvz.weight" in W:  # Qwen3-Next: interleaved per key-head group
            g4 = (h @ W[p + "in_proj_qkvz.weight"].T).view(T, nk, 2 * dk + 2 * r * dv)
            q, k = g4[..., :dk], g4[..., dk:2 * dk]
            v = g4[..., 2 * dk:2 * dk + r * dv].reshape(T, nv * dv)
            z = g4[..., 2 * dk + r * dv:].reshape(T, nv, dv)
            ba = (h @ W[p + "in_proj_ba.weight"].T).view(T, nk, 2 * r)
            b, a = ba[..., :r].reshape(T, nv), ba[..., r:].reshape(T, nv)
            mixed = torch.cat([q.reshape(T, nk * dk), k.reshape(T, nk * dk), v], -1)
        else:  # Qwen3.5: contiguous [all q | all k | all v], separate z, b, a
            mixed = h @ W[p + "in_proj_qkv.weight"].T
            z = (h @ W[p + "in_proj_z.weight"].T).view(T, nv, dv)
            b, a = h @ W[p + "in_proj_b.weight"].T, h @ W[p + "in_proj_a.weight"].T
        cw = W[p + "conv1d.weight"][:, 0, :]  # [C, K]; causal: out[t] = sum_j cw[:, j] * x[t - K + 1 + j]
        xp = torch.cat([torch.zeros(K - 1, mixed.shape[1]), mixed], 0)
        conv = silu(sum(cw[:, j] * xp[j:j + T] for j in range(K)))
        q = conv[:, :nk * dk].view(T, nk, dk)
        k = conv[:, nk * dk:2 * nk * dk].view(T, nk, dk)
        v = conv[:, 2 * nk * dk:].view(T, nv, dv)
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) * dk ** -0.5
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        beta = torch.sigmoid(b)
        g = -torch.exp(W[p + "A_log"]) * torch.nn.functional.softplus(a + W[p + "dt_bias"])
        kh = torch.arange(nv) // r  # value head hv reads key head hv // r
        S = torch.zeros(nv, dk, dv)
        o = torch.empty(T, nv, dv)
        for t in range(T):
            kt, qt = k[t, kh], q[t, kh]  # [nv, dk]
            S = S * torch.exp(g[t])[:, None, None]
            delta = (v[t] - torch.einsum("hk,hkv->hv", kt, S)) * beta[t][:, None]
            S = S + kt[:, :, None] * delta[:, None, :]
            o[t] = torch.einsum("hk,hkv->hv", qt, S)
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + eps) * W[p + "norm.weight"] * silu(z)
        return o.reshape(T, nv * dv) @ W[p + "out_proj.weight"].T

    def attention(h, p):
        nh, nkv, hd = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
        qg = (h @ W[p + "q_proj.weight"].T).view(T, nh, 2 * hd)  # per head [query | gate]
        q, gate = qg[..., :hd], qg[..., hd:].reshape(T, nh * hd)
        k = (h @ W[p + "k_proj.weight"].T).view(T, nkv, hd)
        v = (h @ W[p + "v_proj.weight"].T).view(T, nkv, hd)
        q, k = rms_1p(q, W[p + "q_norm.weight"]), rms_1p(k, W[p + "k_norm.weight"])
        rot = int(hd * prf)
        inv = 1.0 / theta ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot)
        ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
        cos, sin = torch.cat([ang, ang], -1).cos()[:, None], torch.cat([ang, ang], -1).sin()[:, None]

        def rope_(x):
            xr, xp = x[..., :rot], x[..., rot:]
            rh = torch.cat([-xr[..., rot // 2:], xr[..., :rot // 2]], -1)
            return torch.cat([xr * cos + rh * sin, xp], -1)

        q, k = rope_(q), rope_(k)
        kv_of = torch.arange(nh) // (nh // nkv)
        s = torch.einsum("thd,shd->hts", q, k[:, kv_of]) * hd ** -0.5
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        o = torch.einsum("hts,shd->thd", s.softmax(-1), v[:, kv_of]).reshape(T, nh * hd)
        return (o * torch.sigmoid(gate)) @ W[p + "o_proj.weight"].T

    def swiglu(x, wg, wu, wd):
        return (silu(x @ wg.T) * (x @ wu.T)) @ wd.T

    def mlp(h, p):
        if p + "gate.weight" not in W:
            return swiglu(h, W[p + "gate_proj.weight"], W[p + "up_proj.weight"], W[p + "down_proj.weight"])
        E, top = tc["num_experts"], tc["num_experts_per_tok"]
        probs = (h @ W[p + "gate.weight"].T).softmax(-1)
        wts, idx = probs.topk(top, -1)
        if tc.get("norm_topk_prob", True):  # Qwen3.5-MoE has no such field and always renormalises
            wts = wts / wts.sum(-1, keepdim=True)
        if p + "experts.gate_up_proj" in W:  # packed: [E, 2I, H] (gate rows first), [E, H, I]
            gu, dn = W[p + "experts.gate_up_proj"], W[p + "experts.down_proj"]
            I = gu.shape[1] // 2
            ex = [(gu[e, :I], gu[e, I:], dn[e]) for e in range(E)]
        else:  # per expert
            ex = [(W[f"{p}experts.{e}.gate_proj.weight"], W[f"{p}experts.{e}.up_proj.weight"],
                   W[f"{p}experts.{e}.down_proj.weight"]) for e in range(E)]
        out = torch.zeros_like(h)
        for t in range(T):
            for j in range(top):
                out[t] += wts[t, j] * swiglu(h[t], *ex[int(idx[t, j])])
        shared = swiglu(h, W[p + "shared_expert.gate_proj.weight"], W[p + "shared_expert.up_proj.weight"],
                        W[p + "shared_expert.down_proj.weight"])
        return out + torch.sigmoid(h @ W[p + "shared_expert_gate.weight"].T) * shared

    emb = W[pre + "embed_tokens.weight"]
    x = emb[torch.tensor(ids)]
    for i in range(L):
        p = f"{pre}layers.{i}."
        h = rms_1p(x, W[p + "input_layernorm.weight"])
        x = x + (gdn(h, p + "linear_attn.") if layer_types[i] == "linear_attention" else attention(h, p + "self_attn."))
        x = x + mlp(rms_1p(x, W[p + "post_attention_layernorm.weight"]), p + "mlp.")
    x = rms_1p(x, W[pre + "norm.weight"])
    return x @ W.get("lm_head.weight", emb).T  # tied: no lm_head.weight in the file


def check_dir(model_dir: str) -> tuple[float, float]:
    with open(os.path.join(model_dir, "golden.json")) as f:
        golden = json.load(f)
    with safe_open(os.path.join(model_dir, "golden_logits.safetensors"), framework="pt") as f:
        prompt_logits, decode_logits = f.get_tensor("prompt_logits"), f.get_tensor("decode_logits")
    prompt, greedy_ids = golden["prompt_ids"], golden["greedy_ids"]
    full = reference_logits(model_dir, prompt + greedy_ids[:-1])
    T = len(prompt)
    if full[T - 1:].argmax(-1).tolist() != greedy_ids:
        print(f"  {model_dir}: reference greedy ids differ from golden.json")
        return float("inf"), float("inf")
    return float((full[:T] - prompt_logits).abs().max()), float((full[T - 1:] - decode_logits).abs().max())


def main() -> int:
    require_pinned_transformers()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "models"))
    ap.add_argument("--only", default=None, help="comma-separated model names")
    ap.add_argument("--seeds", type=int, default=SEED_CANDIDATES)
    ap.add_argument("--check", action="store_true",
                    help="only compare the committed files against the independent plain-torch reference")
    args = ap.parse_args()

    if args.check:
        worst = 0.0
        for name, *_ in MODELS:
            if args.only and name not in args.only.split(","):
                continue
            dp, dd = check_dir(os.path.join(args.out, name))
            worst = max(worst, dp, dd)
            print(f"{name}: reference vs golden max|diff| prompt_logits {dp:.3e}, decode_logits {dd:.3e}")
        return 0 if worst < 1e-3 else 1

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, threads {torch.get_num_threads()}")
    tok = build_tokenizer()
    tok_cfg = tokenizer_config(tok)
    prompt_text, prompt = prompt_ids_from_text(tok)
    assert tok.decode(prompt, skip_special_tokens=False) == prompt_text
    print(f"tokenizer: vocab {tok.get_vocab_size()} (specials {[tok.token_to_id(s) for s in SPECIAL_TOKENS]}); "
          f"prompt {len(prompt)} tokens")

    os.makedirs(args.out, exist_ok=True)
    results = []
    for name, cls, cfg_fn, base_seed, gains, save_kw in MODELS:
        if args.only and name not in args.only.split(","):
            continue
        results.append(make_model(name, cls, cfg_fn, base_seed, gains, save_kw, tok, tok_cfg, prompt_text, prompt,
                                  args.out, args.seeds))
        # the HF tokenizer loaded from the directory must agree with the raw one
        d = os.path.join(args.out, name)
        hf_tok = AutoTokenizer.from_pretrained(d)
        assert hf_tok(prompt_text)["input_ids"] == prompt, "AutoTokenizer disagrees with tokenizer.json"
        assert hf_tok.eos_token == "<|im_end|>"
        chat = hf_tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                          add_generation_prompt=True)
        assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", chat
        dp, dd = check_dir(d)
        results[-1]["ref_diff"] = (dp, dd)
        assert max(dp, dd) < 1e-3, (name, dp, dd)

    print_layouts(results)
    for r in results:
        print(f"{r['name']}: seed {r['seed']}, prompt {r['T']} tokens, min margin {r['min_margin']:.4f}, "
              f"decode-vs-prefill max|diff| {r['dec_vs_prefill']:.3e}, independent reference vs golden "
              f"{max(r['ref_diff']):.3e}, dir {r['size'] / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
