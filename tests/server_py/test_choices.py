#!/usr/bin/env python3
"""n > 1 through the official `openai` client: one prefill, a sequence per choice. Choices
are reproducible with a seed (and choice 0 is the n = 1 answer for that seed); streamed
choices assemble to the non-streamed ones; usage counts every choice's tokens; logprobs and
tool calls per choice.

    python tests/server_py/test_choices.py --hypic-bin build/hypic [--source-dir .]
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_openai_client as base  # noqa: E402 - parses --hypic-bin / --source-dir, SKIPs without openai
from test_openai_client import MODEL, salt  # noqa: E402
import test_tools  # noqa: E402

ASK = [{"role": "user", "content": "Tell me about rivers."}]


def streamed_choices(stream):
    texts, finish = {}, {}
    for ch in stream:
        for c in ch.choices:
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    return [texts[i] for i in sorted(texts)], [finish[i] for i in sorted(finish)]


class Choices(base.ServerCase):
    def chat(self, **kw):
        kw.setdefault("model", MODEL)
        kw.setdefault("messages", ASK)
        kw.setdefault("max_tokens", 6)
        return self.client.chat.completions.create(**kw)

    def test_seeded_choices_are_reproducible(self):
        kw = dict(n=3, temperature=1.0, seed=5, extra_body={"cache_salt": salt()})
        a = self.chat(**kw)
        self.assertEqual([c.index for c in a.choices], [0, 1, 2])
        texts = [c.message.content for c in a.choices]
        self.assertEqual([c.message.content for c in self.chat(**kw).choices], texts)
        self.assertGreater(len(set(texts)), 1, texts)  # sampled: the choices differ
        one = self.chat(temperature=1.0, seed=5)
        self.assertEqual(one.choices[0].message.content, texts[0])
        # Every choice ran to max_tokens: the usage counts all of them, the prompt once.
        self.assertTrue(all(c.finish_reason == "length" for c in a.choices))
        self.assertEqual(a.usage.completion_tokens, 3 * 6)
        self.assertEqual(a.usage.prompt_tokens, one.usage.prompt_tokens)
        self.assertEqual(a.usage.total_tokens, a.usage.prompt_tokens + 18)

    def test_greedy_choices_are_equal(self):
        c = self.chat(n=2, temperature=0).choices
        self.assertEqual(c[0].message.content, c[1].message.content)

    def test_streamed_choices_assemble_to_the_non_streamed(self):
        kw = dict(n=3, temperature=1.0, seed=11)
        want = self.chat(**kw)
        texts, finish = streamed_choices(self.chat(stream=True, **kw))
        self.assertEqual(texts, [c.message.content for c in want.choices])
        self.assertEqual(finish, [c.finish_reason for c in want.choices])

    def test_completions_with_logprobs(self):
        r = self.client.completions.create(model=MODEL, prompt="Once upon a time", n=2, max_tokens=4,
                                           temperature=1.0, seed=3, logprobs=2)
        self.assertEqual(len(r.choices), 2)
        for c in r.choices:
            self.assertEqual(len(c.logprobs.tokens), 4)
            self.assertEqual("".join(c.logprobs.tokens), c.text)

    def test_tool_calls_per_choice(self):
        r = self.chat(n=2, messages=test_tools.ASK, tools=test_tools.TOOLS, tool_choice="required",
                      parallel_tool_calls=False, temperature=1.0, seed=2, max_tokens=300)
        for c in r.choices:
            self.assertEqual(c.finish_reason, "tool_calls")
            self.assertEqual(len(c.message.tool_calls), 1)
            test_tools.check_args(self, c.message.tool_calls[0].function.name, c.message.tool_calls[0].function.arguments)

    def test_too_many_choices(self):
        import openai
        with self.assertRaises(openai.BadRequestError) as cm:
            self.chat(n=17)
        self.assertEqual(cm.exception.body["param"], "n")


if __name__ == "__main__":
    unittest.main(argv=base.UNITTEST_ARGV)
