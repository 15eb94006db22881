#!/usr/bin/env python3
"""Deterministic generator of multi-document reading tasks for hypic-tiny.

Every prompt is a small fictional *world*: people, towns and companies with attributes and links
(a person is born in a town and works for a company; a company has its headquarters in a town).
Each document describes one entity: a header line, then filler sentences with the entity's facts
scattered among them. Tasks:

  single    one-hop lookup (like TriviaQA):      "Who is the mayor of Brennwick?" -> "Tova Lindqvar"
  two_hop   bridge across two documents (HotpotQA): "In which town was Ilsa Marrow born, and on which
            river does that town lie?" -> "Brennwick, Selva" (the bridge entity, then the answer)
  aggregate over several documents (multi-document summarisation): list the matching entities in
            document order ("Ilsa Marrow, Doran Kell") or count them ("3")

Prompt layout (ChatML; exactly what the hypic engine builds, see README.md):

  prefix   = "<|im_start|>system\\n" + SYSTEM + "<|im_end|>\\n<|im_start|>user\\n"
  segment  = "Document: " + title + "\\n" + text + "\\n\\n"          (one per document, in order)
  suffix   = "Question: " + question + "<|im_end|>\\n<|im_start|>assistant\\n"
  reply    = "Answer: " + answer + "<|im_end|>"           (the model's output; scored after stripping
                                                            "Answer:", case-insensitive exact match)

Each segment starts with a letter and ends with ".\\n\\n", so under the Qwen2 pre-tokenizer regex it
tokenises identically alone and inside any prompt (tokens never merge across part boundaries).

Splits: `train` and `heldout` use different seeds *and* disjoint entity names: every generated name
(surname, town, river, company stem) is assigned to a split by a hash of its text, and a split only
uses its own names. First names, professions, products and filler words are shared.

Reproducibility: example i of a split is a pure function of (split, profile, task, i) through
random.Random(string seed); nothing depends on global state, the platform or the Python hash seed.

    python gen_data.py --split heldout --profile eval --per-task 100 --out heldout.jsonl
    python gen_data.py --split train --profile mixed --n 4000 --out train_sample.jsonl
"""
from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import zlib

SYSTEM = "You answer questions using only the documents provided. Reply with the answer only."
PREFIX = "<|im_start|>system\n" + SYSTEM + "<|im_end|>\n<|im_start|>user\n"
SUFFIX_TAIL = "<|im_end|>\n<|im_start|>assistant\n"
EOS = "<|im_end|>"
# The assistant's reply is ANSWER_PREFIX + answer + EOS, e.g. "Answer: Brennwick<|im_end|>". The prefix
# makes the answer's first word carry its leading space, so it tokenises exactly as in the documents
# ("Ġ"-prefixed pieces) and the model can copy tokens instead of re-spelling names.
ANSWER_PREFIX = "Answer:"
# a follow-up turn (training only, appended after the first answer's <|im_end|>):
FOLLOWUP_HEAD = "\n<|im_start|>user\n"

SEEDS = {"train": 1234, "heldout": 98765}
HELDOUT_BUCKET = 5  # a name belongs to heldout iff crc32(name) % HELDOUT_BUCKET == 0

TASKS = ("single", "two_hop", "aggregate")


def render_segment(doc: dict) -> str:
    return "Document: " + doc["title"] + "\n" + doc["text"] + "\n\n"


def render_suffix(question: str) -> str:
    return "Question: " + question + SUFFIX_TAIL


def render_followup(question: str) -> str:
    return FOLLOWUP_HEAD + render_suffix(question)


def render_prompt(rec: dict) -> str:
    """The full prompt text up to (and including) '<|im_start|>assistant\\n'."""
    return PREFIX + "".join(render_segment(d) for d in rec["documents"]) + render_suffix(rec["question"])


def render_reply(reply: str) -> str:
    """The model's reply to a question whose reference reply text is `reply` (rec["reply"])."""
    return ANSWER_PREFIX + " " + reply + EOS


def normalize_answer(s: str) -> str:
    """The comparable answer in a reply or a gold answer: drops <|im_end|> and "Answer:", reads the values
    back from restated facts ("The mayor of X is V. The river of Y is W" -> "v, w"), drops a trailing period,
    case and repeated spaces. Names and values never contain " is "."""
    s = s.replace(EOS, "").strip()
    if s.startswith(ANSWER_PREFIX):
        s = s[len(ANSWER_PREFIX):]
    s = re.sub(r"\s+", " ", s.strip())
    if " is " in s:
        s = ", ".join(part.rsplit(" is ", 1)[-1].strip().rstrip(".") for part in re.split(r"\. (?=The )", s))
    return s.rstrip(".").strip().lower()


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------
ONSETS = ["b", "br", "c", "d", "dr", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w",
          "z", "j", "st", "tr", "gr", "th", "sh", "ch"]
VOWELS = ["a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ou", "ei"]
CODAS = ["", "", "", "", "", "n", "r", "l", "s", "m", "k", "nd", "rt"]
TOWN_SUFFIXES = ["wick", "ford", "holm", "stead", "mere", "by", "ton", "dale", "gard", "port", "burg",
                 "haven", "moor", "field", "bridge", "crest"]
COMPANY_KINDS = ["Works", "Foundry", "Mills", "Traders", "Company", "Guild", "Press", "Workshop",
                 "Brothers", "Industries", "Collective", "Cooperative"]


def _syllable(rng: random.Random) -> str:
    return rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)


def _word(rng: random.Random, nsyl: int) -> str:
    w = "".join(_syllable(rng) for _ in range(nsyl))
    return w[:1].upper() + w[1:]


def name_split(name: str) -> str:
    return "heldout" if zlib.crc32(name.encode()) % HELDOUT_BUCKET == 0 else "train"


def _first_names() -> list[str]:
    rng = random.Random("hypic-tiny first names")
    out: list[str] = []
    while len(out) < 240:
        w = _word(rng, rng.choice([1, 2, 2]))
        if 3 <= len(w) <= 8 and w not in out:
            out.append(w)
    return out


FIRST_NAMES = _first_names()

PROFESSIONS = ["baker", "carpenter", "weaver", "potter", "blacksmith", "fisher", "miller", "tailor",
               "glassblower", "shepherd", "brewer", "mason", "cartographer", "bookbinder", "clockmaker",
               "ropemaker", "beekeeper", "librarian", "surgeon", "astronomer", "teacher", "painter",
               "sailor", "gardener", "jeweller", "lawyer", "chemist", "engineer", "musician", "farmer",
               "printer", "tanner", "cooper", "saddler", "locksmith", "translator", "architect", "nurse",
               "judge", "courier"]
PRODUCTS = ["copper kettles", "glass lamps", "wool blankets", "leather boots", "iron nails",
            "paper maps", "wooden toys", "silver spoons", "clay pots", "rope ladders", "pocket watches",
            "oil paintings", "river boats", "linen shirts", "brass bells", "honey cakes", "stone tiles",
            "garden tools", "fishing nets", "music boxes", "wax candles", "printed books", "steel locks",
            "woven baskets", "felt hats", "glass bottles", "wind chimes", "sea charts", "bicycle wheels",
            "sewing needles"]


class Names:
    """Draws unique names of one split for one prompt."""

    def __init__(self, rng: random.Random, split: str):
        self.rng, self.split, self.used = rng, split, set()

    def _draw(self, make) -> str:
        for _ in range(10000):
            n, key = make()
            if name_split(key) == self.split and n not in self.used and key not in self.used:
                self.used.add(n)
                self.used.add(key)
                return n
        raise RuntimeError("name space exhausted")

    def person(self) -> str:
        r = self.rng

        def make():
            sur = _word(r, r.choice([2, 2, 2, 3]))
            return r.choice(FIRST_NAMES) + " " + sur, sur
        return self._draw(make)

    def town(self) -> str:
        r = self.rng

        def make():
            t = _word(r, r.choice([1, 2])) + r.choice(TOWN_SUFFIXES)
            return t, t
        return self._draw(make)

    def river(self) -> str:
        r = self.rng

        def make():
            w = _word(r, r.choice([2, 2, 3]))
            return w, w
        return self._draw(make)

    def company(self) -> str:
        r = self.rng

        def make():
            stem = _word(r, r.choice([2, 2, 3]))
            return stem + " " + r.choice(COMPANY_KINDS), stem
        return self._draw(make)


# ---------------------------------------------------------------------------------------------
# Filler text
# ---------------------------------------------------------------------------------------------
ADJ = ["quiet", "old", "narrow", "bright", "busy", "cold", "green", "famous", "small", "large", "gentle",
       "steep", "sunny", "windy", "crowded", "peaceful", "ancient", "modern", "wooden", "stone", "colourful",
       "simple", "careful", "patient", "curious", "generous", "honest", "clever", "cheerful", "serious",
       "rainy", "misty", "golden", "silent", "lively", "humble", "proud", "distant", "hidden", "open"]
NOUN = ["market", "garden", "bridge", "harbour", "library", "square", "road", "valley", "hill", "forest",
        "lake", "workshop", "school", "festival", "museum", "tower", "church", "mill", "orchard", "station",
        "meadow", "village", "theatre", "inn", "kitchen", "courtyard", "lighthouse", "canal", "field", "path",
        "house", "shop", "barn", "castle", "pier", "well", "chapel", "fountain", "gallery", "park"]
PNOUN = ["children", "visitors", "neighbours", "farmers", "travellers", "students", "merchants",
         "musicians", "families", "fishermen", "painters", "old friends", "local people", "pilgrims"]
VERB = ["enjoy", "remember", "visit", "describe", "admire", "discuss", "photograph", "paint", "praise",
        "explore", "celebrate", "mention", "recommend", "study", "love"]
SEASON = ["spring", "summer", "autumn", "winter"]
TIMEW = ["in the morning", "in the evening", "at night", "on weekends", "during the holidays",
         "after the harvest", "before dawn", "on market days", "every year", "most afternoons"]
THINGS = ["bread", "tea", "apples", "music", "old songs", "fresh fish", "letters", "flowers", "stories",
          "maps", "soup", "cheese", "games", "poems", "candles", "lanterns"]
WEATHER = ["rain", "snow", "fog", "wind", "sunshine", "frost", "thunder", "heat"]

GENERIC = [
    "The {adj} {noun} is {adv} full of {pnoun} {time}.",
    "Many {pnoun} {verb} the {adj} {noun} near the {noun2}.",
    "In {season} the {noun} becomes {adj} and {adj2}.",
    "A {adj} path leads from the {noun} to the {noun2}.",
    "{Pnoun} often bring {thing} to the {noun} {time}.",
    "There is a {adj} {noun} behind the {noun2}, and {pnoun} like to rest there.",
    "The {weather} came early that {season}, and the {noun} stayed {adj} for weeks.",
    "Nobody knows exactly when the {adj} {noun} was built.",
    "Some {pnoun} say that the {noun} was once {adj2}, but others disagree.",
    "On clear days one can see the {noun} from the top of the {noun2}.",
    "The smell of {thing} drifts across the {noun} {time}.",
    "Old maps show a {adj} {noun} where the {noun2} stands today.",
    "Every {season}, the {pnoun} gather at the {noun} to share {thing}.",
    "It is said that {weather} in {season} brings good luck to the {noun}.",
    "The road to the {noun} is {adj} and rarely {adj2}.",
    "{Pnoun} who {verb} the {noun} usually stay for {thing} and conversation.",
    "A small sign by the {noun} asks {pnoun} to keep the {noun2} {adj}.",
    "Nothing much happens at the {noun} {time}, which suits the {pnoun} well.",
    "The {noun2} was repaired after the {weather} of a {adj} {season}.",
    "Stories about the {adj} {noun} are told to {pnoun} {time}.",
]
ABOUT = {
    "person": [
        "{E} is known among friends as a {adj} and {adj2} person.",
        "{E} likes to walk to the {noun} {time}.",
        "{E} once spent a whole {season} repairing an old {noun}.",
        "Friends of {E} say that {E} makes excellent {thing}.",
        "{E} enjoys {thing} and long conversations at the {noun}.",
        "As a child, {E} often played near the {noun}.",
        "{E} keeps a {adj} notebook full of drawings of the {noun}.",
        "{E} prefers {season} to any other season.",
    ],
    "town": [
        "{E} is a {adj} town with a {adj2} {noun}.",
        "Visitors to {E} often {verb} its {noun}.",
        "The streets of {E} are {adj} {time}.",
        "In {season}, {E} holds a {adj} festival near the {noun}.",
        "Most houses in {E} are built of {adj} stone.",
        "{E} is famous in the region for its {thing}.",
        "A {adj} {noun} stands at the centre of {E}.",
    ],
    "company": [
        "{E} employs many {adj} workers.",
        "The workshop of {E} is {adj} and {adj2}.",
        "{E} began as a {adj} family business.",
        "Customers praise {E} for its {adj} service.",
        "{E} sponsors a {adj} festival every {season}.",
        "The offices of {E} overlook a {adj} {noun}.",
    ],
}


def _fill(rng: random.Random, tmpl: str, ent: str = "") -> str:
    def pick(lst):
        return rng.choice(lst)
    adj, adj2 = rng.sample(ADJ, 2)
    noun, noun2 = rng.sample(NOUN, 2)
    pn = pick(PNOUN)
    s = tmpl.format(E=ent, adj=adj, adj2=adj2, noun=noun, noun2=noun2, pnoun=pn, Pnoun=pn[:1].upper() + pn[1:],
                    verb=pick(VERB), season=pick(SEASON), time=pick(TIMEW), thing=pick(THINGS),
                    weather=pick(WEATHER), adv=pick(["often", "usually", "sometimes", "always", "rarely"]))
    return s[:1].upper() + s[1:]


def filler_sentence(rng: random.Random, etype: str, ent: str) -> str:
    if rng.random() < 0.3:
        return _fill(rng, rng.choice(ABOUT[etype]), ent)
    return _fill(rng, rng.choice(GENERIC))


# ---------------------------------------------------------------------------------------------
# Facts and questions
# ---------------------------------------------------------------------------------------------
def _article(w: str) -> str:
    return ("an " if w[0] in "aeiou" else "a ") + w


# Data formats (set_format; train.py --data-format):
# * "restated" (default since session 4): every fact is stated in one canonical sentence, "The {attribute}
#   of {entity} is {value}.", and a reply restates it ("Answer: The mayor of Brennwick is Tova Lindqvar"):
#   the model copies the attribute and the entity from the question, and the value then follows the same
#   multi-token context as in the document, where a lookup can complete it (a reply "Answer: {value}"
#   gives the lookup no key: the token before the value is ":" in every reply). Scoring reads the value(s)
#   back (normalize_answer).
# * "varied" (sessions 2-3; the first stage of the model shipped in session 4, and the tokenizer corpus of
#   every run): facts in 2-3 surface forms each (FACTS_VARIED), reply "Answer: {answer}". Kept so that those
#   runs and the tokenizer reproduce exactly.
FORMATS = ("restated", "varied")
FORMAT = "restated"


def set_format(name: str) -> None:
    global FORMAT
    assert name in FORMATS, name
    FORMAT = name


FACTS_VARIED = {  # (entity type, attribute) -> sentence variants
    ("person", "birthplace"): ["{E} was born in the town of {V}.", "{E} was born in {V}.",
                               "The birthplace of {E} is {V}."],
    ("person", "profession"): ["{E} works as {AV}.", "By profession, {E} is {AV}.",
                               "The profession of {E} is {V}."],
    ("person", "birth_year"): ["{E} was born in the year {V}.", "The birth year of {E} is {V}."],
    ("person", "employer"): ["{E} works for {V}.", "{E} is employed by {V}.", "The employer of {E} is {V}."],
    ("town", "river"): ["{E} lies on the river {V}.", "The river {V} flows through {E}."],
    ("town", "mayor"): ["The mayor of {E} is {V}.", "{V} is the mayor of {E}."],
    ("town", "founded"): ["{E} was founded in the year {V}.", "The town of {E} was founded in {V}."],
    ("town", "population"): ["{E} has a population of {V}.", "The population of {E} is {V}."],
    ("company", "hq"): ["{E} has its headquarters in {V}.", "{E} is based in the town of {V}.",
                        "The headquarters of {E} are in {V}."],
    ("company", "founder"): ["{E} was founded by {V}.", "The founder of {E} is {V}."],
    ("company", "founded"): ["{E} was founded in the year {V}.", "{E} has existed since {V}."],
    ("company", "product"): ["{E} makes {V}.", "{E} is known for making {V}.", "The main product of {E} is {V}."],
}
ATTR_WORDS = {  # (entity type, attribute) -> the attribute's noun in facts and replies
    ("person", "birthplace"): "birthplace", ("person", "profession"): "profession",
    ("person", "birth_year"): "birth year", ("person", "employer"): "employer",
    ("town", "river"): "river", ("town", "mayor"): "mayor", ("town", "founded"): "founding year",
    ("town", "population"): "population", ("company", "hq"): "headquarters",
    ("company", "founder"): "founder", ("company", "founded"): "founding year",
    ("company", "product"): "main product",
}


def fact_sentence(etype: str, attr: str, ent: str, value: str) -> str:
    """The canonical statement of a fact, without the final period (a reply ends here)."""
    return f"The {ATTR_WORDS[(etype, attr)]} of {ent} is {value}"


def _reply(answer: str, restated: str) -> str:
    return restated if FORMAT == "restated" else answer


QUESTIONS = {
    ("person", "birthplace"): ["In which town was {E} born?", "Where was {E} born?"],
    ("person", "profession"): ["What is the profession of {E}?", "What does {E} work as?"],
    ("person", "birth_year"): ["In which year was {E} born?"],
    ("person", "employer"): ["Which company does {E} work for?", "Who is the employer of {E}?"],
    ("town", "river"): ["On which river does {E} lie?"],
    ("town", "mayor"): ["Who is the mayor of {E}?"],
    ("town", "founded"): ["In which year was {E} founded?"],
    ("town", "population"): ["What is the population of {E}?"],
    ("company", "hq"): ["Where does {E} have its headquarters?", "In which town is {E} based?"],
    ("company", "founder"): ["Who founded {E}?"],
    ("company", "founded"): ["In which year was {E} founded?"],
    ("company", "product"): ["What does {E} make?"],
}
# two-hop: (type, link attribute) -> first half of the question; (target type, attribute) -> second half
LINKS = {
    ("person", "birthplace"): ("town", "In which town was {E} born"),
    ("person", "employer"): ("company", "Which company does {E} work for"),
    ("company", "hq"): ("town", "In which town does {E} have its headquarters"),
}
HOP2 = {
    ("town", "river"): "and on which river does that town lie?",
    ("town", "mayor"): "and who is the mayor of that town?",
    ("town", "founded"): "and in which year was that town founded?",
    ("town", "population"): "and what is the population of that town?",
    ("company", "hq"): "and in which town does that company have its headquarters?",
    ("company", "founder"): "and who founded that company?",
    ("company", "product"): "and what does that company make?",
    ("company", "founded"): "and in which year was that company founded?",
}
AGG = {  # (type, attribute) -> (list question, count question)
    ("person", "birthplace"): ("Which of the people in the documents were born in {V}? List them in document order.",
                               "How many of the people in the documents were born in {V}?"),
    ("person", "profession"): ("Which of the people in the documents work as {AV}? List them in document order.",
                               "How many of the people in the documents work as {AV}?"),
    ("person", "employer"): ("Which of the people in the documents work for {V}? List them in document order.",
                             "How many of the people in the documents work for {V}?"),
    ("company", "hq"): ("Which of the companies in the documents have their headquarters in {V}? "
                        "List them in document order.",
                        "How many of the companies in the documents have their headquarters in {V}?"),
    ("company", "product"): ("Which of the companies in the documents make {V}? List them in document order.",
                             "How many of the companies in the documents make {V}?"),
}
ATTRS = {"person": ["birthplace", "profession", "birth_year", "employer"],
         "town": ["river", "mayor", "founded", "population"],
         "company": ["hq", "founder", "founded", "product"]}


class World:
    def __init__(self, rng: random.Random, split: str):
        self.rng = rng
        self.names = Names(rng, split)
        self.extra_towns: list[str] = []
        self.extra_companies: list[str] = []

    def new_entity(self, etype: str) -> dict:
        n = self.names
        name = {"person": n.person, "town": n.town, "company": n.company}[etype]()
        return {"type": etype, "name": name, "attrs": {}}

    def fill_attrs(self, ent: dict, towns: list[str], companies: list[str]) -> None:
        r, a = self.rng, ent["attrs"]
        t = ent["type"]
        if t == "person":
            a.setdefault("birthplace", r.choice(towns))
            a.setdefault("profession", r.choice(PROFESSIONS))
            a.setdefault("birth_year", str(r.randint(1700, 1999)))
            a.setdefault("employer", r.choice(companies))
        elif t == "town":
            a.setdefault("river", self.names.river())
            a.setdefault("mayor", self.names.person())
            a.setdefault("founded", str(r.randint(1000, 1899)))
            a.setdefault("population", str(r.randint(1200, 98000)))
        else:
            a.setdefault("hq", r.choice(towns))
            a.setdefault("founder", self.names.person())
            a.setdefault("founded", str(r.randint(1750, 1999)))
            a.setdefault("product", r.choice(PRODUCTS))


def _value_text(attr: str, v: str) -> dict:
    return {"V": v, "AV": _article(v) if attr == "profession" else v}


def all_questions(docs: list[dict]) -> list[dict]:
    """Every question answerable from these documents, with answers and gold document indices."""
    qs: list[dict] = []
    by_name = {d["name"]: i for i, d in enumerate(docs)}
    for i, d in enumerate(docs):
        for attr, v in d["attrs"].items():
            for tmpl in QUESTIONS[(d["type"], attr)]:
                qs.append({"task": "single", "kind": f"{d['type']}.{attr}", "question": tmpl.format(E=d["name"]),
                           "answer": v, "reply": _reply(v, fact_sentence(d["type"], attr, d["name"], v)),
                           "gold_docs": [i]})
                break  # template variety is drawn at sampling time, see _pick_template
        for (t, link), (ttype, head) in LINKS.items():
            if d["type"] != t or d["attrs"].get(link) not in by_name:
                continue
            j = by_name[d["attrs"][link]]
            tgt = docs[j]
            for (tt, attr2), tail in HOP2.items():
                if tt != ttype or attr2 not in tgt["attrs"]:
                    continue
                qs.append({"task": "two_hop", "kind": f"{t}.{link}>{tt}.{attr2}",
                           "question": head.format(E=d["name"]) + ", " + tail,
                           "answer": tgt["name"] + ", " + tgt["attrs"][attr2],
                           "reply": _reply(tgt["name"] + ", " + tgt["attrs"][attr2],
                                           fact_sentence(t, link, d["name"], tgt["name"]) + ". "
                                           + fact_sentence(tt, attr2, tgt["name"], tgt["attrs"][attr2])),
                           "gold_docs": sorted([i, j])})
    for (t, attr), (lq, cq) in AGG.items():
        values = sorted({d["attrs"][attr] for d in docs if d["type"] == t})
        ntype = sum(d["type"] == t for d in docs)
        if ntype < 2:
            continue
        for v in values:
            match = [i for i, d in enumerate(docs) if d["type"] == t and d["attrs"][attr] == v]
            vt = _value_text(attr, v)
            names = ", ".join(docs[i]["name"] for i in match)
            qs.append({"task": "aggregate", "kind": f"list.{t}.{attr}", "question": lq.format(**vt),
                       "answer": names, "reply": names, "gold_docs": match})
            qs.append({"task": "aggregate", "kind": f"count.{t}.{attr}", "question": cq.format(**vt),
                       "answer": str(len(match)), "reply": str(len(match)), "gold_docs": match})
    return qs


def _pick_template(rng: random.Random, q: dict, docs: list[dict]) -> dict:
    """Re-draw the surface form of a single-hop question among its variants."""
    if q["task"] != "single":
        return q
    d = docs[q["gold_docs"][0]]
    t, attr = q["kind"].split(".")
    q = dict(q)
    q["question"] = rng.choice(QUESTIONS[(t, attr)]).format(E=d["name"])
    return q


# ---------------------------------------------------------------------------------------------
# Length profiles (lengths in *approximate* tokens of the hypic-tiny tokenizer, see est_tokens)
# ---------------------------------------------------------------------------------------------
PROFILES = {
    # name: (n_docs range, doc length range, total prompt range, follow-up range)
    "micro": ((2, 3), (20, 90), (80, 350), (8, 14)),   # facts and little filler: retrieval is easy to find
    "short": ((2, 4), (40, 220), (150, 700), (3, 6)),
    "medium": ((3, 6), (80, 600), (500, 2000), (5, 9)),
    "long": ((3, 8), (100, 1500), (1000, 4000), (6, 10)),
    "eval": ((3, 8), (100, 1500), (1000, 4000), (0, 0)),
}
TOKENS_PER_WORD = 1.06  # calibrated against the trained tokenizer (tools/tiny/train_tokenizer.py prints it)


def est_tokens(text: str) -> int:
    """Approximate token count: words and punctuation marks, digits counted one per token."""
    n = 0
    for w in re.findall(r"\d|[A-Za-z]+|[^\sA-Za-z\d]", text):
        n += 1 if (w.isdigit() or not w[0].isalpha()) else TOKENS_PER_WORD * (1 + len(w) // 9)
    return int(round(n))


def _doc_lengths(rng: random.Random, profile: str, n: int) -> list[int]:
    (_, _), (lo, hi), (tlo, thi), _ = PROFILES[profile]
    for _ in range(200):
        ls = [int(math.exp(rng.uniform(math.log(lo), math.log(hi)))) for _ in range(n)]
        tot = sum(ls) + 40
        target = rng.uniform(tlo, thi)
        scale = target / tot
        ls = [max(lo, min(hi, int(x * scale))) for x in ls]
        if tlo <= sum(ls) + 40 <= thi:
            return ls
    return ls


def _render_doc(rng: random.Random, ent: dict, target: int) -> str:
    facts = []
    for attr, v in ent["attrs"].items():
        if FORMAT == "varied":
            tmpl = rng.choice(FACTS_VARIED[(ent["type"], attr)])
            facts.append(tmpl.format(E=ent["name"], **_value_text(attr, v)))
        else:
            facts.append(fact_sentence(ent["type"], attr, ent["name"], v) + ".")
    rng.shuffle(facts)
    used = sum(est_tokens(f) for f in facts) + est_tokens(ent["name"]) + 3
    filler = []
    while used < target:
        s = filler_sentence(rng, ent["type"], ent["name"])
        filler.append(s)
        used += est_tokens(s) + 0.3
    # facts at random places among the filler; the first sentence is a fact or mentions the entity
    sents = filler[:]
    for f in facts:
        sents.insert(rng.randint(0, len(sents)), f)
    # paragraphs of 3..8 sentences
    paras, cur = [], []
    for s in sents:
        cur.append(s)
        if len(cur) >= rng.randint(3, 8):
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    return "\n".join(paras)


def make_example(split: str, profile: str, index: int, task: str | None = None) -> dict:
    """Example `index` of (split, profile). task=None draws the main task (train mix)."""
    rng = random.Random(f"hypic-tiny/{SEEDS[split]}/{split}/{profile}/{task}/{index}")
    if task is None:
        task = rng.choices(TASKS, weights=[0.4, 0.3, 0.3])[0]
    (nlo, nhi), _, _, (flo, fhi) = PROFILES[profile]
    n = rng.randint(nlo, nhi)
    if task == "aggregate":
        n = max(n, 3)
    if task == "two_hop":
        n = max(n, 2)
    w = World(rng, split)
    # entity types of the documents
    if task == "aggregate":
        agg_t, agg_attr = rng.choice(list(AGG))
        nt = rng.randint(3, n) if n > 3 else 3
        types = [agg_t] * nt + [rng.choice(["person", "town", "company"]) for _ in range(n - nt)]
    else:
        types = [rng.choice(["person", "person", "town", "company"]) for _ in range(n)]
    if task == "two_hop":
        link = rng.choice(list(LINKS))
        types[0], types[1] = link[0], LINKS[link][0]
    rng.shuffle(types)
    docs = [w.new_entity(t) for t in types]
    towns = [d["name"] for d in docs if d["type"] == "town"] + [w.names.town() for _ in range(rng.randint(2, 4))]
    comps = [d["name"] for d in docs if d["type"] == "company"] + [w.names.company() for _ in range(rng.randint(2, 4))]
    if task == "two_hop":  # force one chain
        src = next(d for d in docs if d["type"] == link[0])
        tgt = next(d for d in docs if d["type"] == LINKS[link][0] and d is not src)
        src["attrs"][link[1]] = tgt["name"]
    if task == "aggregate":  # plant 1..4 matches (mostly >= 2) of one value, the others differ
        same = [d for d in docs if d["type"] == agg_t]
        pool = {"birthplace": towns, "employer": comps, "hq": towns, "profession": PROFESSIONS,
                "product": PRODUCTS}[agg_attr]
        value = rng.choice(pool)
        m = min(len(same) - 1, rng.choice([1, 2, 2, 3, 3, 4]))
        for d in rng.sample(same, m):
            d["attrs"][agg_attr] = value
        others = [x for x in pool if x != value]
        for d in same:
            d["attrs"].setdefault(agg_attr, rng.choice(others))
    for d in docs:
        w.fill_attrs(d, towns, comps)
    lens = _doc_lengths(rng, profile, n)
    documents = [{"title": d["name"], "text": _render_doc(rng, d, L)} for d, L in zip(docs, lens)]
    qs = all_questions(docs)
    main_pool = [q for q in qs if q["task"] == task]
    if task == "two_hop":
        main_pool = [q for q in main_pool if q["kind"].startswith(f"{link[0]}.{link[1]}>")]
    if task == "aggregate":
        main_pool = [q for q in main_pool if q["kind"].endswith(f".{agg_t}.{agg_attr}")
                     and q["gold_docs"] and len(q["gold_docs"]) == m]
    main = _pick_template(rng, rng.choice(main_pool), docs)
    # follow-up questions (training only): other questions about the same documents, mixed tasks
    nf = rng.randint(flo, fhi)
    rest = [q for q in qs if q["question"] != main["question"] and
            not (q["gold_docs"] == main["gold_docs"] and q["kind"] == main["kind"])]
    follow = []
    by_task = {t: [q for q in rest if q["task"] == t] for t in TASKS}
    for _ in range(nf):
        avail = [t for t in TASKS if by_task[t]]
        if not avail:
            break
        t = rng.choices(avail, weights=[{"single": 0.5, "two_hop": 0.25, "aggregate": 0.25}[a] for a in avail])[0]
        q = by_task[t].pop(rng.randrange(len(by_task[t])))
        follow.append(_pick_template(rng, q, docs))
    rec = {
        "id": f"{split}-{profile}-{task}-{index}", "split": split, "profile": profile,
        "task": task, "kind": main["kind"], "system": SYSTEM, "documents": documents,
        "question": main["question"], "answer": main["answer"], "reply": main["reply"],
        "gold_docs": main["gold_docs"],
    }
    if follow:
        rec["followups"] = [{k: q[k] for k in ("task", "kind", "question", "answer", "reply", "gold_docs")}
                           for q in follow]
    return rec


def check_record(rec: dict) -> None:
    """Unambiguity checks: titles unique, every answer string is in the gold documents."""
    titles = [d["title"] for d in rec["documents"]]
    assert len(set(titles)) == len(titles), titles
    for q in [rec] + rec.get("followups", []):
        if q["task"] == "single":
            assert q["answer"] in rec["documents"][q["gold_docs"][0]]["text"], q
        elif q["task"] == "two_hop":
            bridge, val = q["answer"].split(", ", 1)
            assert bridge in rec["documents"][q["gold_docs"][0]]["text"] or bridge in \
                rec["documents"][q["gold_docs"][1]]["text"]
            assert any(val in rec["documents"][i]["text"] for i in q["gold_docs"]), q
        else:
            if q["kind"].startswith("list"):
                assert q["answer"] == ", ".join(titles[i] for i in q["gold_docs"]), q
            else:
                assert q["answer"] == str(len(q["gold_docs"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=list(SEEDS), required=True)
    ap.add_argument("--profile", choices=list(PROFILES) + ["mixed"], default="eval")
    ap.add_argument("--n", type=int, default=0, help="examples with the train task mix")
    ap.add_argument("--per-task", type=int, default=0, help="examples per task (single, two_hop, aggregate)")
    ap.add_argument("--start", type=int, default=0, help="first example index")
    ap.add_argument("--out", required=True)
    ap.add_argument("--format", choices=FORMATS, default=FORMAT, help="fact and reply format (see FORMATS)")
    a = ap.parse_args()
    set_format(a.format)
    n_out = 0
    with open(a.out, "w") as f:
        jobs = []
        if a.per_task:
            jobs += [(t, i) for t in TASKS for i in range(a.start, a.start + a.per_task)]
        jobs += [(None, i) for i in range(a.start, a.start + a.n)]
        for task, i in jobs:
            prof = a.profile if a.profile != "mixed" else ("short", "medium", "long")[i % 3]
            rec = make_example(a.split, prof, i, task)
            check_record(rec)
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n_out += 1
    print(f"wrote {n_out} records to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
