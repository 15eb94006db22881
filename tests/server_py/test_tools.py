#!/usr/bin/env python3
"""Tool calling and structured output through the official `openai` client: required and named
tool choices give calls whose arguments validate against the tool's schema (constrained
decoding: the test model has random weights and was never trained for tools); streamed calls
assemble to the non-streamed ones; a two-turn exchange (call, tool result, answer); a call cut
by max_tokens is dropped (no fragment in content); response_format json_schema gives JSON of the schema; bad
tool fields are 400s naming their param.

    python tests/server_py/test_tools.py --hypic-bin build/hypic [--source-dir .]
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_openai_client as base  # noqa: E402 - parses --hypic-bin / --source-dir, SKIPs without openai
from test_openai_client import DOC_A, MODEL, salt  # noqa: E402

import openai  # noqa: E402

# Arguments of enums, booleans and bounded arrays: a random-weight model ends them quickly.
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"enum": ["Paris", "Oslo", "Lima"]},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "detailed": {"type": "boolean"}},
        "required": ["city", "unit"], "additionalProperties": False}}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a zone",
    "parameters": {"type": "object", "properties": {
        "zones": {"type": "array", "items": {"enum": ["UTC", "CET"]}, "minItems": 1, "maxItems": 2}},
        "required": ["zones"], "additionalProperties": False}}}
TOOLS = [WEATHER, CLOCK]
ASK = [{"role": "user", "content": "What is the weather in Oslo, and what time is it?"}]


def check_args(test, name, arguments):
    """The arguments parse and validate against the tool's schema."""
    args = json.loads(arguments)
    test.assertIsInstance(args, dict)
    if name == "get_weather":
        test.assertIn(args["city"], ("Paris", "Oslo", "Lima"))
        test.assertIn(args["unit"], ("celsius", "fahrenheit"))
        test.assertLessEqual(set(args), {"city", "unit", "detailed"})
        if "detailed" in args:
            test.assertIsInstance(args["detailed"], bool)
    else:
        test.assertEqual(name, "get_time")
        test.assertEqual(set(args), {"zones"})
        test.assertTrue(1 <= len(args["zones"]) <= 2)
        test.assertTrue(set(args["zones"]) <= {"UTC", "CET"})


def assemble(stream):
    """What the openai client's users do with delta.tool_calls: fragments joined per index."""
    calls, content, finish = {}, "", None
    for ch in stream:
        if not ch.choices:
            continue
        c = ch.choices[0]
        if c.delta.content:
            content += c.delta.content
        for tc in c.delta.tool_calls or []:
            d = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            if tc.id:
                d["id"] = tc.id
            if tc.function and tc.function.name:
                d["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                d["arguments"] += tc.function.arguments
        finish = c.finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish


class ToolCalls(base.ServerCase):
    def create(self, **kw):
        kw.setdefault("model", MODEL)
        kw.setdefault("messages", ASK)
        kw.setdefault("tools", TOOLS)
        kw.setdefault("temperature", 0)
        kw.setdefault("max_tokens", 300)
        return self.client.chat.completions.create(**kw)

    def test_required_gives_valid_calls(self):
        for seed in range(3):
            r = self.create(tool_choice="required", temperature=0 if seed == 0 else 1.0, seed=seed,
                            parallel_tool_calls=seed != 2)
            c = r.choices[0]
            if seed == 1:  # sampled parallel calls may go on until max_tokens cuts one (then text)
                self.assertIn(c.finish_reason, ("tool_calls", "length"), c)
            else:
                self.assertEqual(c.finish_reason, "tool_calls", c)
                self.assertIsNone(c.message.content)
            self.assertGreaterEqual(len(c.message.tool_calls), 1)
            for tc in c.message.tool_calls:
                self.assertTrue(tc.id.startswith("call_"))
                self.assertEqual(tc.type, "function")
                check_args(self, tc.function.name, tc.function.arguments)

    def test_named_choice_and_no_parallel_calls(self):
        r = self.create(tool_choice={"type": "function", "function": {"name": "get_time"}}, parallel_tool_calls=False)
        c = r.choices[0]
        self.assertEqual(c.finish_reason, "tool_calls")
        self.assertEqual(len(c.message.tool_calls), 1)
        self.assertEqual(c.message.tool_calls[0].function.name, "get_time")
        check_args(self, "get_time", c.message.tool_calls[0].function.arguments)

    def test_streamed_calls_assemble_to_the_non_streamed(self):
        kw = dict(tool_choice="required", extra_body={"cache_salt": salt()})
        want = self.create(**kw).choices[0]
        content, calls, finish = assemble(self.create(stream=True, **kw))
        self.assertEqual(finish, "tool_calls")
        self.assertEqual(content, "")
        self.assertEqual([(c["name"], c["arguments"]) for c in calls],
                         [(t.function.name, t.function.arguments) for t in want.message.tool_calls])
        self.assertTrue(all(c["id"].startswith("call_") for c in calls))

    def test_two_turn_exchange(self):
        first = self.create(tool_choice="required").choices[0].message
        history = ASK + [first.model_dump(exclude_none=True)]
        for tc in first.tool_calls:
            history.append({"role": "tool", "tool_call_id": tc.id, "content": json.dumps({"result": "sunny, 21 C"})})
        answer = self.create(messages=history, max_tokens=12).choices[0]
        self.assertIn(answer.finish_reason, ("stop", "length"))
        self.assertIsInstance(answer.message.content, str)
        content, calls, finish = assemble(self.create(messages=history, max_tokens=12, stream=True))
        self.assertEqual((content, finish), (answer.message.content, answer.finish_reason))
        self.assertEqual(calls, [])
        # The history's tool result must answer a call of the assistant message before it.
        bad = history[:-1] + [{"role": "tool", "tool_call_id": "call_unknown", "content": "x"}]
        with self.assertRaises(openai.BadRequestError) as cm:
            self.create(messages=bad)
        self.assertEqual(cm.exception.body["param"], "messages[%d].tool_call_id" % (len(bad) - 1))

    def test_auto_and_none_give_text(self):
        for choice in ("auto", "none"):
            c = self.create(tool_choice=choice, max_tokens=8).choices[0]
            self.assertIsInstance(c.message.content, str)
            self.assertIsNone(c.message.tool_calls)
            self.assertIn(c.finish_reason, ("stop", "length"))

    def test_call_cut_by_max_tokens_is_dropped(self):
        c = self.create(tool_choice="required", max_tokens=4).choices[0]
        self.assertEqual(c.finish_reason, "length")
        self.assertIsNone(c.message.tool_calls)
        self.assertIn(c.message.content, (None, ""))  # no fragment of the call
        content, calls, finish = assemble(self.create(tool_choice="required", max_tokens=4, stream=True))
        self.assertEqual((content, calls, finish), ("", [], "length"))

    def test_tools_with_segments(self):
        s = salt()
        msgs = [{"role": "user", "content": [
            {"type": "text", "text": DOC_A, "cache_control": {"type": "segment"}},
            {"type": "text", "text": "Check the weather for the city in the document."}]}]
        kw = dict(messages=msgs, tool_choice="required", extra_body={"cache_salt": s})
        a = self.create(**kw)
        b = self.create(**kw)
        self.assertEqual(b.usage.model_extra["hypic"]["segments_hit"], 1)
        self.assertEqual([t.function.arguments for t in a.choices[0].message.tool_calls],
                         [t.function.arguments for t in b.choices[0].message.tool_calls])

    def test_tool_descriptions_are_segments_reused_in_any_order(self):
        def tool(i):
            return {"type": "function", "function": {
                "name": "tool_%d" % i,
                "description": ("Tool number %d of the agent. " % i) + " ".join("It handles case %d.%d carefully." % (i, k) for k in range(12)),
                "parameters": {"type": "object", "properties": {"x": {"enum": [1, 2]}}, "required": ["x"],
                               "additionalProperties": False}}}
        many = [tool(i) for i in range(5)]
        kw = dict(tool_choice="required", parallel_tool_calls=False,
                  extra_body={"cache_salt": salt(), "hypic": {"auto_segments": ["tools"]}})
        a = self.create(tools=many[:4], **kw)
        ha = a.usage.model_extra["hypic"]
        self.assertEqual((ha["auto_segments"], ha["segments_hit"], ha["segments_missed"]), (4, 0, 4))
        b = self.create(tools=[many[3], many[4], many[0]], **kw)  # another subset, another order
        hb = b.usage.model_extra["hypic"]
        self.assertEqual((hb["auto_segments"], hb["segments_hit"], hb["segments_missed"]), (3, 2, 1))
        self.assertGreater(hb["reused_tokens"], 0)
        for r in (a, b):
            self.assertEqual(r.choices[0].finish_reason, "tool_calls")
            for tc in r.choices[0].message.tool_calls:
                self.assertTrue(tc.function.name.startswith("tool_"))
                self.assertEqual(set(json.loads(tc.function.arguments)), {"x"})

    def test_response_format_json_schema(self):
        schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}, "sure": {"type": "boolean"},
                                                   "tags": {"type": "array", "items": {"enum": [1, 2]}, "maxItems": 3}},
                  "required": ["answer", "sure", "tags"], "additionalProperties": False}
        for temperature in (0, 1.0):
            r = self.create(tools=openai.NOT_GIVEN, temperature=temperature, seed=7, messages=[{"role": "user", "content": "Is water wet?"}],
                            response_format={"type": "json_schema", "json_schema": {"name": "verdict", "strict": True, "schema": schema}})
            c = r.choices[0]
            self.assertEqual(c.finish_reason, "stop", c)
            v = json.loads(c.message.content)
            self.assertIn(v["answer"], ("yes", "no"))
            self.assertIsInstance(v["sure"], bool)
            self.assertTrue(len(v["tags"]) <= 3 and set(v["tags"]) <= {1, 2})

    def test_bad_tool_fields(self):
        cases = [
            (dict(tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
            (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "pattern": "x"}}}]),
             "tools[0].function.parameters"),
            (dict(tools=[{"type": "function", "function": {"name": "bad name"}}]), "tools[0].function.name"),
            (dict(tools=openai.NOT_GIVEN, tool_choice="required"), "tool_choice"),
            (dict(messages=ASK + [{"role": "tool", "content": "x"}]), "messages[1].tool_call_id"),
            (dict(tools=openai.NOT_GIVEN, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"oneOf": []}}}),
             "response_format.json_schema.schema"),
        ]
        for kw, param in cases:
            with self.subTest(param=param):
                with self.assertRaises(openai.BadRequestError) as cm:
                    self.create(**kw)
                self.assertEqual(cm.exception.body["param"], param, cm.exception.body)
        self.assertEqual(self.create(max_tokens=2).choices[0].finish_reason, "length")  # still serving


TINY = "hypic-tiny"
ORDER = {"type": "function", "function": {
    "name": "order_pizzas", "description": "Orders pizzas",
    "parameters": {"type": "object", "properties": {"count": {"type": "integer"}},
                   "required": ["count"], "additionalProperties": False}}}
COLOUR = {"type": "function", "function": {
    "name": "pick_colour", "description": "Picks a colour",
    "parameters": {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}},
                   "required": ["colour"], "additionalProperties": False}}}
RAW = ("<tool_call>", "<function=", "</tool_call>", "<parameter=")


class EmbeddedModelToolCalls(base.ServerCase):
    """The tool-call edge cases on the embedded model (models/hypic-tiny, which was not trained for
    tools): an integer argument ends (its grammar bounds the digits), a reply cut by max_tokens
    inside a call keeps the calls before it and never shows a raw call fragment, streamed or not."""
    SERVER_MODEL_DIR = os.path.join(base.OPTS["source_dir"], "models", "hypic-tiny")
    ASK = [{"role": "user", "content": "Order three pizzas."}]

    def create(self, **kw):
        kw.setdefault("model", TINY)
        kw.setdefault("messages", self.ASK)
        kw.setdefault("temperature", 0)
        return self.client.chat.completions.create(**kw)

    def check_clean(self, content):
        for raw in RAW:
            self.assertNotIn(raw, content or "", content)

    def test_an_integer_argument_ends(self):
        c = self.create(tools=[ORDER], tool_choice="required", parallel_tool_calls=False, max_tokens=200).choices[0]
        self.assertEqual(c.finish_reason, "tool_calls", c)
        self.assertEqual(len(c.message.tool_calls), 1)
        args = json.loads(c.message.tool_calls[0].function.arguments)
        self.assertIsInstance(args["count"], int)
        self.assertLessEqual(len(str(abs(args["count"]))), 16)
        content, calls, finish = assemble(self.create(tools=[ORDER], tool_choice="required", parallel_tool_calls=False,
                                                      max_tokens=200, stream=True))
        self.assertEqual((content, finish), ("", "tool_calls"))
        self.assertEqual([x["arguments"] for x in calls], [c.message.tool_calls[0].function.arguments])

    def test_a_reply_cut_inside_a_call_keeps_the_calls_before_it(self):
        full = self.create(tools=[COLOUR, ORDER], tool_choice="required", max_tokens=400).choices[0]
        self.check_clean(full.message.content)
        n = len(full.message.tool_calls or [])
        self.assertGreaterEqual(n, 1)
        for max_tokens in range(2, 60, 3):
            with self.subTest(max_tokens=max_tokens):
                kw = dict(tools=[COLOUR, ORDER], tool_choice="required", max_tokens=max_tokens)
                c = self.create(**kw).choices[0]
                self.check_clean(c.message.content)
                got = [(t.function.name, t.function.arguments) for t in c.message.tool_calls or []]
                self.assertEqual(got, [(t.function.name, t.function.arguments) for t in full.message.tool_calls[:len(got)]])
                if c.finish_reason == "length":
                    self.assertIn(c.message.content, (None, ""))
                content, calls, finish = assemble(self.create(stream=True, **kw))
                self.check_clean(content)
                self.assertEqual(([(x["name"], x["arguments"]) for x in calls], finish), (got, c.finish_reason))

    def test_auto_and_named_choices(self):
        c = self.create(tools=[COLOUR, ORDER], tool_choice="auto", max_tokens=24).choices[0]
        self.check_clean(c.message.content)
        named = self.create(tools=[COLOUR, ORDER], tool_choice={"type": "function", "function": {"name": "pick_colour"}},
                            parallel_tool_calls=False, max_tokens=60).choices[0]
        self.assertEqual(named.finish_reason, "tool_calls")
        self.assertEqual([t.function.name for t in named.message.tool_calls], ["pick_colour"])
        self.assertIn(json.loads(named.message.tool_calls[0].function.arguments)["colour"], ("red", "green", "blue"))


if __name__ == "__main__":
    unittest.main(argv=base.UNITTEST_ARGV)
