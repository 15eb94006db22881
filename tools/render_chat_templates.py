#!/usr/bin/env python3
"""Renders the real Jinja chat templates of the families hypic implements by hand
(src/tokenizer/chat_template.h) on fixed conversations, for tests/tokenizer/test_chat_template.cpp.

    /opt/hypic-dev/bin/python tools/render_chat_templates.py

Needs transformers (its apply_chat_template, the Jinja environment the model's users get) and
tokenizers. Prints one JSON object per case: template, messages, add_generation_prompt, text.
The Jinja strings are those of tools/family_tokenizers.py (Ring-V2's and MiniMax-M1's
tokenizer_config.json, MiniMax-Text-01's), copied verbatim there with their sources.
MiniMax's templates read message['content'][0]['text'], so MiniMax messages are passed as one
text part each, as the model cards show.
"""
import json
import os
import sys

from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import family_tokenizers as ft  # noqa: E402

TEMPLATES = {
    "bailing": ft.BAILING_CHAT_TEMPLATE,
    "minimax": ft.MINIMAX_CHAT_TEMPLATE,
    "minimax-text-01": ft.MINIMAX_TEXT_01_CHAT_TEMPLATE,
    "chatml": ft.QWEN_CHAT_TEMPLATE,
}

# (messages, add_generation_prompt); the same conversations for every template.
CASES = [
    ([("system", "You are helpful."), ("user", "Hi\nthere")], False),
    ([("system", "You are helpful."), ("user", "Hi\nthere")], True),
    ([("user", "Q")], True),
    ([("user", "Q"), ("assistant", "A"), ("user", "")], True),
    ([("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello!"),
      ("user", "Doc one. Doc two. Why?")], True),
    ([("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello!"),
      ("user", "Doc one. Doc two. Why?")], False),
]
# Bailing only: a system message that is not the first, and an empty leading one.
BAILING_EXTRA = [
    ([("user", "a"), ("system", "late"), ("user", "b")], True),
    ([("system", ""), ("user", "x")], True),
]


def main():
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
    for name, template in TEMPLATES.items():
        cases = CASES + (BAILING_EXTRA if name == "bailing" else [])
        for msgs, gen in cases:
            if name.startswith("minimax"):
                conv = [{"role": r, "content": [{"type": "text", "text": c}]} for r, c in msgs]
            else:
                conv = [{"role": r, "content": c} for r, c in msgs]
            text = tok.apply_chat_template(conv, chat_template=template, tokenize=False,
                                           add_generation_prompt=gen)
            print(json.dumps({"template": name, "messages": msgs, "add_generation_prompt": gen,
                              "text": text}, ensure_ascii=False))


if __name__ == "__main__":
    main()
