#!/usr/bin/env python3
"""Deterministic generator of tool-use tasks for hypic-tiny, in the layout hypic's server writes.

A record is an OpenAI chat request (`tools`, `messages`) plus its gold calls, the tools' results
and the final reply. The system turn carries 4-20 tool descriptions in the Qwen3.5 tool format
(each tool's JSON its own segment when the server's `--auto-segments tools` is on); the user asks
something that needs one or two of them:

  tool_direct  the argument is in the question: "What is the river level of Brennwick?"
               -> river_level_check(town="Brennwick")   (some tools also take an integer year)
  tool_doc     the argument is in a document of the user turn: "What is the river level of the
               town where Tova Lindqvar was born?" -> the document says Brennwick
  tool_two     two calls in one reply: one tool for two entities, or two tools for one entity
  no_tool      a question the user turn's documents answer: no call, the answer

After the calls, a user turn of tool responses ("The river level of Brennwick is 3 metres.") and
the final reply restating them ("Answer: The river level of Brennwick is 3 metres"), scored as
gen_data's answers are (normalize_answer).

Tool names (subject, then verb: river_level_check) belong to one split by a hash of the name
(gen_data.name_split), like entity names: held-out records only use tools, people, towns and
companies training never saw (the 31 subjects themselves are shared).

`prompt_chunks` renders a conversation exactly as hypic's server tokenises it (server/
engine_request.cpp: each turn's open and close markers apart, the text between segments as one
run, each segment alone); tests/server/test_tool_prompts.cpp compares the prompts of the first
held-out record of each task with the server's.

    python gen_tools.py --split heldout --per-task 50 --out tools_heldout.jsonl
"""
from __future__ import annotations

import argparse
import json
import random
import sys

import gen_data

SEEDS = {"train": 4321, "heldout": 56789}
TASKS = ("tool_direct", "tool_doc", "tool_two", "no_tool")
SYSTEM = "You answer questions using the tools and documents provided. Reply with the answer only."

# The Qwen3.5 tool format as hypic writes it (tokenizer/chat_ml.cpp, ChatMl::tool_format qwen35).
PREAMBLE_HEAD = "# Tools\n\nYou have access to the following functions:\n\n<tools>"
PREAMBLE_TAIL = (
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural "
    "language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question "
    "like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>")
CALL_OPEN, CALL_CLOSE, CALL_SEP = "<tool_call>\n", "\n</tool_call>", "\n"
RESPONSE_OPEN, RESPONSE_CLOSE, RESPONSE_SEP = "<tool_response>\n", "\n</tool_response>", "\n"

VERBS = {"get": "Get", "fetch": "Fetch", "lookup": "Look up", "find": "Find", "check": "Check",
         "query": "Query", "read": "Read", "show": "Show"}
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
# noun -> (entity type, value maker, takes a year). A value maker draws from rng.
SUBJECTS = {
    "weather": ("town", lambda r: r.choice(gen_data.WEATHER), False),
    "local time": ("town", lambda r: f"{r.randint(0, 23):02d}:{r.choice(['00', '15', '30', '45'])}", False),
    "river level": ("town", lambda r: f"{r.randint(1, 9)} metres", False),
    "air quality": ("town", lambda r: r.choice(["good", "fair", "poor", "very poor"]), False),
    "bus fare": ("town", lambda r: f"{r.randint(1, 9)} crowns", False),
    "hotel price": ("town", lambda r: f"{r.randint(40, 400)} crowns", False),
    "train delay": ("town", lambda r: f"{r.randint(2, 90)} minutes", False),
    "water temperature": ("town", lambda r: f"{r.randint(2, 28)} degrees", False),
    "flood warning": ("town", lambda r: r.choice(["none", "low", "high"]), False),
    "market day": ("town", lambda r: r.choice(DAYS), False),
    "parking fee": ("town", lambda r: f"{r.randint(1, 12)} crowns", False),
    "rainfall": ("town", lambda r: f"{r.randint(200, 1400)} millimetres", True),
    "visitor count": ("town", lambda r: str(r.randint(300, 90000)), True),
    "share price": ("company", lambda r: f"{r.randint(3, 900)} crowns", False),
    "order count": ("company", lambda r: str(r.randint(10, 9000)), False),
    "credit rating": ("company", lambda r: r.choice(["AAA", "AA", "A", "BBB", "BB", "B"]), False),
    "open vacancies": ("company", lambda r: str(r.randint(0, 60)), False),
    "delivery time": ("company", lambda r: f"{r.randint(1, 30)} days", False),
    "customer rating": ("company", lambda r: f"{r.randint(1, 5)} stars", False),
    "office hours": ("company", lambda r: f"{r.randint(6, 10)} to {r.randint(15, 20)}", False),
    "revenue": ("company", lambda r: f"{r.randint(2, 900)} thousand crowns", True),
    "staff count": ("company", lambda r: str(r.randint(3, 4000)), True),
    "phone number": ("person", lambda r: f"555 {r.randint(1000, 9999)}", False),
    "account balance": ("person", lambda r: f"{r.randint(0, 9000)} crowns", False),
    "shoe size": ("person", lambda r: str(r.randint(34, 48)), False),
    "next appointment": ("person", lambda r: r.choice(DAYS), False),
    "library fines": ("person", lambda r: f"{r.randint(1, 40)} crowns", False),
    "blood type": ("person", lambda r: r.choice(["A", "B", "AB", "O"]), False),
    "favourite colour": ("person", lambda r: r.choice(["red", "blue", "green", "yellow", "grey", "white"]), False),
    "income": ("person", lambda r: f"{r.randint(10, 200)} thousand crowns", True),
    "tax bill": ("person", lambda r: f"{r.randint(100, 9000)} crowns", True),
}
ENTITY_TYPES = ("town", "person", "company")  # a tool's first parameter is named after its entity type
DIRECT_Q = ["What is the {N} of {E}?", "Can you tell me the {N} of {E}?", "I need the {N} of {E}."]
YEAR_Q = ["What was the {N} of {E} in {Y}?", "Can you tell me the {N} of {E} in {Y}?"]
# (entity type, link attribute) -> (target type, the phrase naming the target)
LINK_PHRASES = {
    ("person", "birthplace"): ("town", "the town where {E} was born"),
    ("company", "hq"): ("town", "the town where {E} has its headquarters"),
    ("person", "employer"): ("company", "the company {E} works for"),
    ("town", "mayor"): ("person", "the mayor of {E}"),
    ("company", "founder"): ("person", "the founder of {E}"),
}


# Key order of a tool's "function" object as the client writes it (the server renders the JSON as
# sent): "name-first" as OpenAI's examples, or "description-first" (set_layout; train.py
# --tools-layout), where the text before each name describes the tool.
LAYOUTS = ("name-first", "description-first", "mixed")  # mixed: each record one of the two, at random
LAYOUT = "name-first"
# With PREFACE the assistant restates what it looks up before its calls ("The river level of
# Brennwick.\n\n<tool_call>..."; Qwen3.5's format allows text before the calls): the subject and
# the entity then sit in the recent context of the name and the argument (set_preface;
# train.py --tools-preface).
PREFACE = False


def set_layout(name: str, preface: bool = False) -> None:
    global LAYOUT, PREFACE
    assert name in LAYOUTS, name
    LAYOUT, PREFACE = name, preface


def tool_name(verb: str, noun: str) -> str:
    """Subject first, then the action ("river_level_check"), as many real APIs name them: a model
    that has written the subject finds the rest of the name after it in the tool list."""
    return noun.replace(" ", "_") + "_" + verb


def tool_noun(name: str) -> str:
    return name.rsplit("_", 1)[0].replace("_", " ")


def tool_def(name: str, noun: str) -> dict:
    """The OpenAI tool object; its schema is a pure function of the name (a tool is always the same)."""
    etype, _, year = SUBJECTS[noun]
    verb = name.rsplit("_", 1)[1]
    param = etype
    props = {param: {"type": "string", "description": f"The name of the {etype}."}}
    required = [param]
    desc = f"{VERBS[verb]} the {noun} of a {etype}."
    if year:
        props["year"] = {"type": "integer", "description": "The year."}
        required.append("year")
        desc = f"{VERBS[verb]} the {noun} of a {etype} in a given year."
    params = {"type": "object", "properties": props, "required": required}
    if LAYOUT == "description-first":
        return {"type": "function", "function": {"description": desc, "name": name, "parameters": params}}
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": params}}


def _param(tool: dict) -> str:
    return next(iter(tool["function"]["parameters"]["properties"]))


def _fact(noun: str, ent: str, year: int | None, value: str) -> str:
    return f"The {noun} of {ent}" + (f" in {year}" if year else "") + f" is {value}"


def _pick_tools(rng: random.Random, split: str, n: int, need: list[str]) -> list[dict]:
    """n tools of `split` with distinct nouns, including one for each noun in `need`, shuffled."""
    verbs = {x: [v for v in VERBS if gen_data.name_split(tool_name(v, x)) == split] for x in SUBJECTS}
    nouns = list(need) + rng.sample([x for x in SUBJECTS if x not in need and verbs[x]], n - len(need))
    tools = [tool_def(tool_name(rng.choice(verbs[noun]), noun), noun) for noun in nouns]
    rng.shuffle(tools)
    return tools


def _docs(rng: random.Random, w: gen_data.World, lead: dict, n_other: int) -> list[dict]:
    """`lead` and n_other distractor entities, attributes filled, rendered short (40-160 tokens)."""
    ents = [lead] + [w.new_entity(rng.choice(["person", "town", "company"])) for _ in range(n_other)]
    towns = [e["name"] for e in ents if e["type"] == "town"] + [w.names.town() for _ in range(2)]
    comps = [e["name"] for e in ents if e["type"] == "company"] + [w.names.company() for _ in range(2)]
    for e in ents:
        w.fill_attrs(e, towns, comps)
    rng.shuffle(ents)
    return ents


def _render_docs(rng: random.Random, ents: list[dict]) -> str:
    return "".join(gen_data.render_segment({"title": e["name"], "text": gen_data._render_doc(rng, e, rng.randint(40, 160))})
                   for e in ents)


def _call(tool: dict, ent: str, year: int | None) -> dict:
    args = {_param(tool): ent}
    if year:
        args["year"] = year
    return {"name": tool["function"]["name"], "arguments": args}


def _turn(rng: random.Random, split: str, task: str, w: gen_data.World, tools: list[dict], by_noun: dict) -> dict:
    """One question of `task` over the prompt's tools: user content, gold calls, results, reply."""
    def year_for(noun):
        return rng.randint(1950, 2025) if SUBJECTS[noun][2] else None

    def ask(noun, ent_phrase, year):
        t = rng.choice(YEAR_Q if year else DIRECT_Q)
        return t.format(N=noun, E=ent_phrase, Y=year)

    nouns = [n for n in by_noun]
    if task == "no_tool":
        lead = w.new_entity(rng.choice(["person", "town", "company"]))
        ents = _docs(rng, w, lead, rng.randint(0, 2))
        attr = rng.choice(list(lead["attrs"]))
        q = rng.choice(gen_data.QUESTIONS[(lead["type"], attr)]).format(E=lead["name"])
        reply = gen_data.fact_sentence(lead["type"], attr, lead["name"], lead["attrs"][attr])
        return {"task": task, "kind": f"{lead['type']}.{attr}", "content": _render_docs(rng, ents) + "Question: " + q,
                "calls": [], "results": [], "reply": reply, "preface": ""}
    if task == "tool_doc":
        (stype, link), (ttype, phrase) = rng.choice(list(LINK_PHRASES.items()))
        cands = [n for n in nouns if SUBJECTS[n][0] == ttype]
        if not cands:
            return _turn(rng, split, "tool_direct", w, tools, by_noun)
        noun = rng.choice(cands)
        lead = w.new_entity(stype)
        ents = _docs(rng, w, lead, rng.randint(0, 2))
        target = lead["attrs"][link]
        year = year_for(noun)
        calls = [_call(by_noun[noun], target, year)]
        content = _render_docs(rng, ents) + "Question: " + ask(noun, phrase.format(E=lead["name"]), year)
        facts = [(noun, target, year)]
        kind = f"{stype}.{link}>{noun}"
    elif task == "tool_two":
        two_tools = rng.random() < 0.5
        if two_tools:
            etype = rng.choice([t for t in ENTITY_TYPES if sum(SUBJECTS[n][0] == t and not SUBJECTS[n][2] for n in nouns) >= 2]
                               or ["none"])
            if etype == "none":
                return _turn(rng, split, "tool_direct", w, tools, by_noun)
            n1, n2 = rng.sample([n for n in nouns if SUBJECTS[n][0] == etype and not SUBJECTS[n][2]], 2)
            ent = getattr(w.names, etype)()
            facts = [(n1, ent, None), (n2, ent, None)]
            content = "Question: " + f"What are the {n1} and the {n2} of {ent}?"
            kind = "two_tools"
        else:
            noun = rng.choice([n for n in nouns if not SUBJECTS[n][2]] or nouns)
            etype = SUBJECTS[noun][0]
            a, b = getattr(w.names, etype)(), getattr(w.names, etype)()
            year = year_for(noun)
            facts = [(noun, a, year), (noun, b, year)]
            content = "Question: " + (f"What is the {noun} of {a} and of {b}?" if not year else
                                      f"What was the {noun} of {a} and of {b} in {year}?")
            kind = "one_tool_twice"
        calls = [_call(by_noun[n], e, y) for n, e, y in facts]
    else:
        noun = rng.choice(nouns)
        ent = getattr(w.names, SUBJECTS[noun][0])()
        year = year_for(noun)
        facts = [(noun, ent, year)]
        calls = [_call(by_noun[noun], ent, year)]
        content = "Question: " + ask(noun, ent, year)
        kind = noun.replace(" ", "_") + (".year" if year else "")
    values = [SUBJECTS[n][1](rng) for n, _, _ in facts]
    results = [_fact(n, e, y, v) + "." for (n, e, y), v in zip(facts, values)]
    reply = ". ".join(_fact(n, e, y, v) for (n, e, y), v in zip(facts, values))
    preface = " ".join(f"The {n} of {e}" + (f" in {y}" if y else "") + "." for n, e, y in facts)
    return {"task": task, "kind": kind, "content": content, "calls": calls, "results": results, "reply": reply,
            "preface": preface}


def _description_first(tools: list[dict]) -> list[dict]:
    return [{"type": "function", "function": {k: t["function"][k] for k in ("description", "name", "parameters")}}
            for t in tools]


def make_example(split: str, index: int, task: str | None = None, followups: int = 0) -> dict:
    """Record `index` of `split` (task None: the training mix); `followups` more turns (training)."""
    rng = random.Random(f"hypic-tiny-tools/{SEEDS[split]}/{split}/{task}/{index}")
    rec = _make_example(rng, split, index, task, followups)
    # mixed: a draw of its own, so that the record is otherwise the one the other layouts give
    if LAYOUT == "mixed" and random.Random(f"layout/{split}/{task}/{index}").random() < 0.5:
        rec["tools"] = _description_first(rec["tools"])
    return rec


def _make_example(rng: random.Random, split: str, index: int, task: str | None, followups: int) -> dict:
    if task is None:
        task = rng.choices(TASKS, weights=[0.35, 0.25, 0.25, 0.15])[0]
    w = gen_data.World(rng, split)
    for _ in range(100):  # tools that the task can use (a tool of the linked type, two of one type)
        tools = _pick_tools(rng, split, rng.randint(4, 20), [])
        by_noun = {tool_noun(t["function"]["name"]): t for t in tools}
        turns = [_turn(rng, split, task, w, tools, by_noun)]
        if turns[0]["task"] == task:
            break
    for _ in range(followups):
        turns.append(_turn(rng, split, rng.choices(TASKS, weights=[0.35, 0.25, 0.25, 0.15])[0], w, tools, by_noun))
    main = turns[0]
    rec = {"id": f"{split}-tools-{main['task']}-{index}", "split": split, "task": main["task"], "kind": main["kind"],
           "tools": tools, "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": main["content"]}],
           "calls": main["calls"], "results": main["results"], "reply": main["reply"],
           "answer": gen_data.normalize_answer(main["reply"])}
    if PREFACE:
        rec["preface"] = main["preface"]
    if len(turns) > 1:
        rec["followups"] = [{k: t[k] for k in ("task", "content", "calls", "results", "reply", "preface")}
                            for t in turns[1:]]
    return rec


# ---------------------------------------------------------------------------------------------
# Rendering, as the server tokenises it
# ---------------------------------------------------------------------------------------------
def _xml_value(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def calls_text(calls: list[dict]) -> str:
    """An assistant's calls in the Qwen3.5 format (its reply, and the history's assistant turn)."""
    out = []
    for c in calls:
        body = f"<function={c['name']}>\n" + "".join(f"<parameter={k}>\n{_xml_value(v)}\n</parameter>\n"
                                                   for k, v in c["arguments"].items())
        out.append(CALL_OPEN + body + "</function>" + CALL_CLOSE)
    return CALL_SEP.join(out)


def responses_text(results: list[str]) -> str:
    return RESPONSE_SEP.join(RESPONSE_OPEN + r + RESPONSE_CLOSE for r in results)


def record_turns(rec: dict) -> list[dict]:
    """The record's first turn and its follow-ups, each {content, calls, results, reply}."""
    first = {"content": rec["messages"][-1]["content"], "calls": rec["calls"], "results": rec["results"],
             "reply": rec["reply"], "preface": rec.get("preface", "")}
    return [first] + rec.get("followups", [])


def prompt_chunks(rec: dict, turns: list[dict], segment_tools: bool = True) -> list[tuple[str, str]]:
    """(text, role) chunks of a whole conversation, each tokenised on its own by the server.
    role: "marker" (template tokens), "tool" (a tool's segment), "context" (text the model reads),
    "reply" (the assistant's output: calls or the final answer, each ending with <|im_end|>).
    `turns`: the record's turns to write (each: content, calls, results, reply)."""
    tools = ["\n" + json.dumps(t, ensure_ascii=False) for t in rec["tools"]]
    tail = PREAMBLE_TAIL + "\n\n" + rec["messages"][0]["content"]
    out: list[tuple[str, str]] = [("<|im_start|>system\n", "marker")]
    if segment_tools:
        out += [(PREAMBLE_HEAD, "context")] + [(t, "tool") for t in tools] + [(tail, "context")]
    else:
        out.append((PREAMBLE_HEAD + "".join(tools) + tail, "context"))
    out.append(("<|im_end|>\n", "marker"))
    for t in turns:
        out += [("<|im_start|>user\n", "marker"), (t["content"], "context"),
                ("<|im_end|>\n", "marker"), ("<|im_start|>assistant\n", "marker")]
        if t["calls"]:
            head = t["preface"] + "\n\n" if PREFACE and t.get("preface") else ""
            out += [(head + calls_text(t["calls"]) + gen_data.EOS, "reply"), ("\n", "marker"),
                    ("<|im_start|>user\n", "marker"), (responses_text(t["results"]), "context"),
                    ("<|im_end|>\n", "marker"), ("<|im_start|>assistant\n", "marker")]
        out += [(gen_data.render_reply(t["reply"]), "reply"), ("\n", "marker")]
    return out


def request_texts(rec: dict) -> tuple[str, str]:
    """The prompt of the record's request, and of the request after its tools' results (the text up to
    each generation prompt): what the server must write for them (tests/server/test_tool_eval_prompts)."""
    chunks = prompt_chunks(rec, record_turns(rec)[:1])
    texts, cur = [], ""
    for text, role in chunks:
        if role == "reply":
            texts.append(cur)
        cur += text
    return texts[0], (texts[1] if len(texts) > 1 else "")


def write_records(path: str, split: str, per_task: int) -> None:
    """per_task records of each task; the first of each carries the prompts the server must write."""
    with open(path, "w") as f:
        for task in TASKS:
            for i in range(per_task):
                rec = make_example(split, i, task)
                if i == 0:
                    rec["prompt"], rec["result_prompt"] = request_texts(rec)
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=list(SEEDS), required=True)
    ap.add_argument("--per-task", type=int, default=50, help="records per task")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    write_records(a.out, a.split, a.per_task)
    print(f"wrote {a.per_task * len(TASKS)} records to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
