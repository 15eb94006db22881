#!/usr/bin/env python3
"""POST /v1/messages driven by the official `anthropic` Python client (from PyPI, in the test
venv): cache_control blocks are segments that are read from the cache on the second request
(usage.cache_read_input_tokens > 0) with the chat endpoint's answer for the same parts; the SSE
events come in Anthropic's order; x-api-key is the key; a tool_use round trip (a forced call,
streamed too, then its tool_result); extended thinking on a model that reasons; what is not implemented yet (images, a prefilled assistant
turn) is a 400 in Anthropic's error shape.

    python tests/server_py/test_anthropic.py --hypic-bin build/hypic [--source-dir .]
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_openai_client as base  # noqa: E402 - parses --hypic-bin / --source-dir, SKIPs without openai
from test_openai_client import DOC_A, DOC_B, MODEL, HypicServer, http_json, salt, seg_messages  # noqa: E402

try:
    import anthropic
except ImportError:
    print("SKIP: the 'anthropic' package is not importable by %s; run scripts/install.sh" % sys.executable)
    sys.exit(base.SKIP_CODE)

KEY = "test-key-" + os.urandom(4).hex()
GREEDY = {"temperature": 0}  # (this SDK version has no temperature argument; the API has the field)


class Messages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = HypicServer(api_key=KEY)
        cls.addClassCleanup(cls.server.cleanup)
        cls.server.start()
        cls.client = anthropic.Anthropic(base_url=cls.server.base, api_key=KEY, max_retries=0, timeout=60.0)

    def docs_message(self, question="Which is about water?"):
        return [{"role": "user", "content": [
            {"type": "text", "text": DOC_A, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": DOC_B, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": question}]}]

    def test_cache_control_blocks_are_read_from_the_cache_the_second_time(self):
        s = salt()
        kw = dict(model=MODEL, max_tokens=8, system="Answer from the documents.",
                  messages=self.docs_message(), extra_body={"cache_salt": s, "temperature": 0})
        first = self.client.messages.create(**kw)
        self.assertEqual(first.type, "message")
        self.assertEqual(first.role, "assistant")
        self.assertEqual(first.content[0].type, "text")
        self.assertIn(first.stop_reason, ("end_turn", "max_tokens"))
        self.assertGreater(first.usage.cache_creation_input_tokens, 0)
        self.assertEqual(first.usage.cache_read_input_tokens, 0)
        second = self.client.messages.create(**kw)
        self.assertGreater(second.usage.cache_read_input_tokens, 0)
        self.assertEqual(second.usage.cache_read_input_tokens, first.usage.cache_creation_input_tokens)
        self.assertEqual(second.content[0].text, first.content[0].text)
        self.assertEqual(second.usage.output_tokens, first.usage.output_tokens)
        # The chat endpoint's answer for the same marked parts.
        chat = self.server.client(api_key=KEY).chat.completions.create(
            model=MODEL, messages=seg_messages([DOC_A, DOC_B], "Which is about water?", system="Answer from the documents."),
            max_tokens=8, temperature=0, extra_body={"cache_salt": s})
        self.assertEqual(chat.choices[0].message.content, first.content[0].text)

    def test_streaming_events_in_anthropics_order(self):
        kw = dict(model=MODEL, max_tokens=6, messages=self.docs_message("Summarise."),
                  extra_body={"cache_salt": salt(), "temperature": 0})
        want = self.client.messages.create(**kw)
        kinds, text = [], ""
        with self.client.messages.stream(**kw) as stream:
            for ev in stream:
                kinds.append(ev.type)
                if ev.type == "content_block_delta":
                    text += ev.delta.text
            final = stream.get_final_message()
        self.assertEqual(kinds[0], "message_start")
        self.assertEqual(kinds[1], "content_block_start")
        body = [k for k in kinds if k not in ("text", "ping")]  # the SDK adds "text" events of its own
        self.assertEqual(body[-3:], ["content_block_stop", "message_delta", "message_stop"])
        self.assertTrue(all(k == "content_block_delta" for k in body[2:-3]), body)
        self.assertEqual(text, want.content[0].text)
        self.assertEqual(final.content[0].text, want.content[0].text)
        self.assertEqual(final.stop_reason, want.stop_reason)
        self.assertEqual(final.usage.output_tokens, want.usage.output_tokens)

    def test_max_tokens_and_stop_sequences(self):
        r = self.client.messages.create(model=MODEL, max_tokens=2, extra_body=GREEDY,
                                        messages=[{"role": "user", "content": "Tell me a long story"}])
        self.assertEqual(r.stop_reason, "max_tokens")
        self.assertEqual(r.usage.output_tokens, 2)
        longer = self.client.messages.create(model=MODEL, max_tokens=12, extra_body=GREEDY,
                                             messages=[{"role": "user", "content": "Tell me a long story"}])
        text = longer.content[0].text
        if len(text) > 4:  # stop at a piece of what it says anyway
            stop = text[2:4]
            s = self.client.messages.create(model=MODEL, max_tokens=12, extra_body=GREEDY, stop_sequences=[stop],
                                            messages=[{"role": "user", "content": "Tell me a long story"}])
            self.assertEqual((s.stop_reason, s.stop_sequence), ("stop_sequence", stop))
            self.assertEqual(s.content[0].text, text[:text.index(stop)])

    WEATHER = {"name": "get_weather", "description": "The weather in a city",
               "input_schema": {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]},
                                                                 "unit": {"enum": ["celsius", "fahrenheit"]}},
                                "required": ["city", "unit"], "additionalProperties": False}}

    def test_tool_use_round_trip(self):
        ask = [{"role": "user", "content": "Weather in Oslo?"}]
        kw = dict(model=MODEL, max_tokens=120, tools=[self.WEATHER], extra_body=GREEDY,
                  tool_choice={"type": "any", "disable_parallel_tool_use": True})
        r = self.client.messages.create(messages=ask, **kw)
        self.assertEqual(r.stop_reason, "tool_use")
        uses = [b for b in r.content if b.type == "tool_use"]
        self.assertEqual(len(uses), 1)
        self.assertEqual(uses[0].name, "get_weather")
        self.assertIn(uses[0].input["city"], ("Paris", "Oslo"))
        self.assertIn(uses[0].input["unit"], ("celsius", "fahrenheit"))
        # Streamed: the same call, as a tool_use block whose input arrives as input_json_delta.
        with self.client.messages.stream(messages=ask, **kw) as stream:
            kinds = [ev.type for ev in stream]
            final = stream.get_final_message()
        self.assertEqual(final.stop_reason, "tool_use")
        self.assertEqual([(b.name, b.input) for b in final.content if b.type == "tool_use"], [(uses[0].name, uses[0].input)])
        self.assertIn("input_json", kinds)  # the SDK's event for an input_json_delta
        self.assertEqual(kinds[0], "message_start")
        self.assertEqual(kinds[-1], "message_stop")
        # The result goes back as a tool_result block; the answer is text.
        history = ask + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny, 21 C"},
                                                      {"type": "text", "text": "So?"}]}]
        answer = self.client.messages.create(model=MODEL, max_tokens=6, tools=[self.WEATHER], messages=history, extra_body=GREEDY)
        self.assertIn(answer.stop_reason, ("end_turn", "max_tokens"))
        self.assertEqual(answer.content[0].type, "text")
        # A tool_result that answers no tool_use is refused.
        bad = history[:-1] + [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nope", "content": "x"}]}]
        with self.assertRaises(anthropic.BadRequestError):
            self.client.messages.create(model=MODEL, max_tokens=6, tools=[self.WEATHER], messages=bad, extra_body=GREEDY)

    def test_errors_in_anthropics_shape(self):
        with self.assertRaises(anthropic.BadRequestError) as e:  # a schema outside the supported subset
            self.client.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "hi"}],
                                        tools=[{"name": "f", "input_schema": {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}}])
        self.assertEqual(e.exception.body["error"]["type"], "invalid_request_error")
        self.assertIn("format", e.exception.body["error"]["message"])
        with self.assertRaises(anthropic.BadRequestError):
            self.client.messages.create(model=MODEL, max_tokens=4, messages=[
                {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Once"}])
        with self.assertRaises(anthropic.NotFoundError) as nf:
            self.client.messages.create(model="no-such-model", max_tokens=4, messages=[{"role": "user", "content": "hi"}])
        self.assertEqual(nf.exception.body["type"], "error")
        for extra in ({}, {"max_tokens": None}):  # missing, or null: the same error
            st, body = http_json("POST", self.server.base + "/v1/messages",
                                 {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **extra},
                                 headers={"x-api-key": KEY})
            self.assertEqual(st, 400, extra)
            self.assertEqual(body["type"], "error")
            self.assertEqual(body["error"]["type"], "invalid_request_error")
            self.assertIn("max_tokens", body["error"]["message"])
        bad = anthropic.Anthropic(base_url=self.server.base, api_key="wrong", max_retries=0)
        with self.assertRaises(anthropic.AuthenticationError):
            bad.messages.create(model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "hi"}])


class Thinking(unittest.TestCase):
    """Extended thinking on a model that reasons (--reasoning on): `thinking` enabled gives a
    thinking block before the text, the same whole and streamed (thinking_delta, an empty
    signature_delta) and the chat endpoint's reasoning_content; not enabled, none; a thinking
    block sent back in history is accepted; bad `thinking` values are 400s."""

    @classmethod
    def setUpClass(cls):
        cls.server = HypicServer("--reasoning", "on", api_key=KEY)
        cls.addClassCleanup(cls.server.cleanup)
        cls.server.start()
        cls.client = anthropic.Anthropic(base_url=cls.server.base, api_key=KEY, max_retries=0, timeout=60.0)

    ASK = [{"role": "user", "content": "Why is the sea salty?"}]
    ON = {"type": "enabled", "budget_tokens": 1024}

    def test_thinking_block_whole_and_streamed(self):
        m = self.client.messages.create(model=MODEL, max_tokens=1100, messages=self.ASK, thinking=self.ON, extra_body=GREEDY)
        self.assertEqual(m.content[0].type, "thinking", m.content)
        self.assertTrue(m.content[0].thinking)
        chat = self.server.client(api_key=KEY).chat.completions.create(
            model=MODEL, messages=self.ASK, max_tokens=1100, temperature=0).choices[0].message
        self.assertEqual(m.content[0].thinking, chat.model_extra["reasoning_content"])
        with self.client.messages.stream(model=MODEL, max_tokens=1100, messages=self.ASK, thinking=self.ON,
                                         extra_body=GREEDY) as s:
            final = s.get_final_message()
        self.assertEqual([b.type for b in final.content], [b.type for b in m.content])
        self.assertEqual(final.content[0].thinking, m.content[0].thinking)
        # History with the thinking block sent back: accepted (the template drops it before a new question).
        again = self.client.messages.create(model=MODEL, max_tokens=8, extra_body=GREEDY, messages=self.ASK + [
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "salt", "signature": ""},
                                              {"type": "text", "text": "Rivers."}]},
            {"role": "user", "content": "And lakes?"}])
        self.assertEqual(again.content[-1].type, "text")

    def test_without_thinking_there_is_no_thinking_block(self):
        m = self.client.messages.create(model=MODEL, max_tokens=8, messages=self.ASK, extra_body=GREEDY)
        self.assertNotIn("thinking", [b.type for b in m.content])

    def test_bad_thinking_values(self):
        for t in ({"type": "enabled"}, {"type": "enabled", "budget_tokens": 100}, {"type": "sometimes"},
                  {"type": "enabled", "budget_tokens": 2048}, "on"):
            st, body = http_json("POST", self.server.base + "/v1/messages",
                                 {"model": MODEL, "max_tokens": 1100, "messages": self.ASK, "thinking": t},
                                 headers={"x-api-key": KEY})
            self.assertEqual(st, 400, (t, body))
            self.assertIn("thinking", body["error"]["message"])


if __name__ == "__main__":
    unittest.main(argv=base.UNITTEST_ARGV, verbosity=2)
