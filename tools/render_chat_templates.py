#!/usr/bin/env python3
"""Renders the real Jinja chat templates of the families hypic implements by hand
(src/tokenizer/chat_template.h) on fixed conversations, for tests/tokenizer/test_chat_template.cpp.

    /opt/hypic-dev/bin/python tools/render_chat_templates.py

Needs transformers (its apply_chat_template, the Jinja environment the model's users get) and
tokenizers. Prints one JSON object per case: template, messages, add_generation_prompt, text.
The Jinja strings are those of tools/family_tokenizers.py (Ring-V2's and MiniMax-M1's
tokenizer_config.json, MiniMax-Text-01's), copied verbatim there with their sources.
MiniMax's templates read message['content'][0]['text'], so MiniMax messages are passed as one
text part each, as the model cards show. "ling3-nothink" is Ling-3.0's template with
enable_thinking=False. The Kimi and Ling-3.0 Jinja texts are partly or wholly reconstructed (see
family_tokenizers.py); before printing, the Ling-3.0 one is checked against the prompts that
ollama's BailingRenderer test (ollama/ollama model/renderers/bailing_test.go) expects.
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
    "kimi": ft.KIMI_CHAT_TEMPLATE,
    "ling3": ft.LING3_CHAT_TEMPLATE,
    "ling3-nothink": ft.LING3_CHAT_TEMPLATE,
}
KWARGS = {"ling3-nothink": {"enable_thinking": False}}

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
# Bailing, Ling-3.0 and Kimi: a system message that is not the first, and an empty leading one.
BAILING_EXTRA = [
    ([("user", "a"), ("system", "late"), ("user", "b")], True),
    ([("system", ""), ("user", "x")], True),
]
EXTRA = {"bailing", "kimi", "ling3", "ling3-nothink"}

# Prompts of ollama's bailing_test.go (text messages only), which the reconstructed Ling-3.0
# template must give: (messages, enable_thinking, expected text with the generation prompt).
OLLAMA_LING3 = [
    ([("user", "Hello")], True,
     "<role>SYSTEM</role>detailed thinking on<|role_end|><role>HUMAN</role>Hello<|role_end|><role>ASSISTANT</role>\n<think>"),
    ([("user", "Hello")], False,
     "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>Hello<|role_end|><role>ASSISTANT</role>\n<think></think>"),
    ([("system", "You are helpful."), ("user", "Hello")], True,
     "<role>SYSTEM</role>You are helpful.\ndetailed thinking on<|role_end|><role>HUMAN</role>Hello<|role_end|><role>ASSISTANT</role>\n<think>"),
    ([("system", "Be brief.\ndetailed thinking off"), ("user", "Hello")], True,
     "<role>SYSTEM</role>Be brief.\ndetailed thinking off<|role_end|><role>HUMAN</role>Hello<|role_end|><role>ASSISTANT</role>\n<think>"),
    ([("user", "Hi"), ("assistant", "Hello there"), ("user", "How are you?")], True,
     "<role>SYSTEM</role>detailed thinking on<|role_end|><role>HUMAN</role>Hi<|role_end|><role>ASSISTANT</role>\n<think></think>Hello there<|role_end|><role>HUMAN</role>How are you?<|role_end|><role>ASSISTANT</role>\n<think>"),
    ([("user", "Q"), ("assistant", "<think>hmm</think>\nAnswer"), ("user", "Next")], True,
     "<role>SYSTEM</role>detailed thinking on<|role_end|><role>HUMAN</role>Q<|role_end|><role>ASSISTANT</role>\n<think>hmm</think>Answer<|role_end|><role>HUMAN</role>Next<|role_end|><role>ASSISTANT</role>\n<think>"),
    ([("user", "Hi"), ("system", "Switch style."), ("user", "Go")], True,
     "<role>SYSTEM</role>detailed thinking on<|role_end|><role>HUMAN</role>Hi<|role_end|><role>SYSTEM</role>Switch style.<|role_end|><role>HUMAN</role>Go<|role_end|><role>ASSISTANT</role>\n<think>"),
]


def check_ling3(tok):
    for msgs, thinking, want in OLLAMA_LING3:
        conv = [{"role": r, "content": c} for r, c in msgs]
        got = tok.apply_chat_template(conv, chat_template=ft.LING3_CHAT_TEMPLATE, tokenize=False,
                                      add_generation_prompt=True, enable_thinking=thinking)
        assert got == want, (msgs, thinking, got, want)


def main():
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
    check_ling3(tok)
    for name, template in TEMPLATES.items():
        cases = CASES + (BAILING_EXTRA if name in EXTRA else [])
        for msgs, gen in cases:
            if name.startswith("minimax"):
                conv = [{"role": r, "content": [{"type": "text", "text": c}]} for r, c in msgs]
            else:
                conv = [{"role": r, "content": c} for r, c in msgs]
            text = tok.apply_chat_template(conv, chat_template=template, tokenize=False,
                                           add_generation_prompt=gen, **KWARGS.get(name, {}))
            print(json.dumps({"template": name, "messages": msgs, "add_generation_prompt": gen,
                              "text": text}, ensure_ascii=False))


if __name__ == "__main__":
    main()
