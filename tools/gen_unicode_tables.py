#!/usr/bin/env python3
"""Generates src/tokenizer/unicode_tables.cpp (character classes) and unicode_tables_nfc.cpp
(NFC data): the Unicode data the tokenizer needs.

Run with the dev interpreter (needs the `tokenizers` package):
    /opt/hypic-dev/bin/python tools/gen_unicode_tables.py

The tables are made to agree with Hugging Face `tokenizers`, the reference we must match:
  * \\p{L}, \\p{N}, \\p{M}, \\s and the two letter-case classes of the o200k split regex
    ([\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}] and [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]) are read from the
    Oniguruma engine inside `tokenizers`
    (the regex engine that runs the Split pre-tokenizer), by running each class over every
    code point. Oniguruma's Unicode version is newer than Python's `unicodedata`, and this
    way a new letter is a letter for us exactly when it is one for HF.
  * NFC data (canonical combining classes, canonical decompositions, compositions) comes
    from `unicodedata`, then is cut back to what the NFC normalizer of `tokenizers` knows
    (it uses an older Unicode version): a decomposition, a combining class or a composition
    is kept only when HF's NFC/NFD show it.
  * "word" (\\w of Rust's regex crate, used for AddedToken.single_word) is approximated as
    L | M | Nd | Nl | Pc | U+200C | U+200D.
  * \\p{Han} (Kimi's split regex, run by tiktoken's fancy-regex) as ranges, also read from
    Oniguruma. tiktoken 0.14's regex crate and this Oniguruma agree on every class used here
    (L, N, M, \\s, the two letter-case classes and Han): checked code point by code point.
"""
import os
import sys
import unicodedata

from tokenizers import Regex, normalizers
from tokenizers import pre_tokenizers as pt

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "tokenizer")
OUT = os.path.join(SRC, "unicode_tables.cpp")
OUT_NFC = os.path.join(SRC, "unicode_tables_nfc.cpp")
MAX_CP = 0x110000
ALL = [c for c in range(MAX_CP) if not 0xD800 <= c <= 0xDFFF]
ALL_STR = "".join(map(chr, ALL))

F_L, F_N, F_M, F_WS, F_WORD, F_NFC_UNSAFE, F_UPPER, F_LOWER = 1, 2, 4, 8, 16, 32, 64, 128


def onig_class(rx):
    """Code points that the Oniguruma class `rx` matches, as HF's Split sees it."""
    split = pt.Split(Regex(rx), "removed")
    rest = set("".join(p for p, _ in split.pre_tokenize_str(ALL_STR)))
    return set(ALL) - set(map(ord, rest))


def main():
    letters, numbers, marks = onig_class(r"\p{L}"), onig_class(r"\p{N}"), onig_class(r"\p{M}")
    spaces = onig_class(r"\s")
    upper = onig_class(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]")
    lower = onig_class(r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]")
    han = onig_class(r"\p{Han}")

    nfc, nfd = normalizers.NFC(), normalizers.NFD()

    # Canonical combining classes that HF knows (0 < ccc: reorders against U+0301 or U+0334).
    ccc = {}
    for c in ALL:
        k = unicodedata.combining(chr(c))
        if not k:
            continue
        a = nfd.normalize_str("\u0301" + chr(c)) != "\u0301" + chr(c)   # 0 < ccc < 230
        b = nfd.normalize_str(chr(c) + "\u0334") != chr(c) + "\u0334"   # ccc > 1
        if a or b:
            ccc[c] = k

    # Canonical decompositions that HF knows (one step), and which of them compose back.
    decomp = {}
    for c in ALL:
        if 0xAC00 <= c <= 0xD7A3:
            continue  # Hangul is algorithmic
        d = unicodedata.decomposition(chr(c))
        if not d or d.startswith("<"):
            continue
        if nfd.normalize_str(chr(c)) == chr(c):
            continue  # newer than HF's tables
        parts = [int(x, 16) for x in d.split()]
        assert 1 <= len(parts) <= 2, (hex(c), d)
        composes = len(parts) == 2 and nfc.normalize_str(chr(parts[0]) + chr(parts[1])) == chr(c)
        decomp[c] = (parts[0], parts[1] if len(parts) == 2 else 0, composes)

    seconds = {b for (a, b, comp) in decomp.values() if comp}
    seconds |= set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))  # Hangul V, T jamo
    unsafe = set(ccc) | seconds
    for c in decomp:
        if nfc.normalize_str(chr(c)) != chr(c):
            unsafe.add(c)  # NFC_QC = No
    # A safe character must also begin with a starter once decomposed.
    for c in decomp:
        first = c
        while first in decomp:
            first = decomp[first][0]
        if first in ccc:
            unsafe.add(c)

    py_word = {c for c in ALL if unicodedata.category(chr(c)) in ("Nd", "Nl", "Pc")}
    flags = bytearray(MAX_CP)
    for c in letters:
        flags[c] |= F_L | F_WORD
    for c in numbers:
        flags[c] |= F_N
    for c in marks:
        flags[c] |= F_M | F_WORD
    for c in spaces:
        flags[c] |= F_WS
    for c in py_word | {0x200C, 0x200D}:
        flags[c] |= F_WORD
    for c in unsafe:
        flags[c] |= F_NFC_UNSAFE
    for c in upper:
        flags[c] |= F_UPPER
    for c in lower:
        flags[c] |= F_LOWER

    runs = []
    prev = -1
    for c in range(MAX_CP):
        if flags[c] != prev:
            runs.append((c, flags[c]))
            prev = flags[c]

    han_ranges = []
    for c in sorted(han):
        if han_ranges and han_ranges[-1][1] == c - 1:
            han_ranges[-1][1] = c
        else:
            han_ranges.append([c, c])

    ccc_ranges = []
    for c in sorted(ccc):
        if ccc_ranges and ccc_ranges[-1][1] == c - 1 and ccc_ranges[-1][2] == ccc[c]:
            ccc_ranges[-1][1] = c
        else:
            ccc_ranges.append([c, c, ccc[c]])

    def rows(items, per_line):
        out = []
        for i in range(0, len(items), per_line):
            out.append("    " + " ".join(items[i:i + per_line]))
        return "\n".join(out)

    def header(f, what):
        f.write(f"// GENERATED by tools/gen_unicode_tables.py -- do not edit. {what}\n")
        f.write(f"// unicodedata {unicodedata.unidata_version}; classes and NFC cut to match "
                "the Hugging Face tokenizers build used to generate.\n")
        f.write('#include "tokenizer/unicode_tables.h"\n\nnamespace hypic::unicode_data {\n\n')

    with open(OUT, "w", encoding="utf-8") as f:
        header(f, "Character classes (NFC data: unicode_tables_nfc.cpp).")
        f.write("// (first code point << 8) | flags; the flags hold up to the next entry.\n")
        f.write(f"const uint32_t kPropRuns[] = {{\n")
        f.write(rows([f"0x{(c << 8) | fl:x}," for c, fl in runs], 8))
        f.write(f"\n}};\nconst size_t kPropRunsCount = {len(runs)};\n\n")
        f.write("// \\p{Han}: [first, last] code point ranges, ascending.\n")
        f.write("const HanRange kHanRanges[] = {\n")
        f.write(rows([f"{{0x{a:x}, 0x{b:x}}}," for a, b in han_ranges], 4))
        f.write(f"\n}};\nconst size_t kHanRangesCount = {len(han_ranges)};\n\n")
        f.write("}  // namespace hypic::unicode_data\n")
    with open(OUT_NFC, "w", encoding="utf-8") as f:
        header(f, "NFC data (character classes: unicode_tables.cpp).")
        f.write("const CccRange kCccRanges[] = {\n")
        f.write(rows([f"{{0x{a:x}, 0x{b:x}, {k}}}," for a, b, k in ccc_ranges], 4))
        f.write(f"\n}};\nconst size_t kCccRangesCount = {len(ccc_ranges)};\n\n")
        f.write("const Decomposition kDecompositions[] = {\n")
        f.write(rows([f"{{0x{c:x}, 0x{a:x}, 0x{b:x}, {int(comp)}}},"
                      for c, (a, b, comp) in sorted(decomp.items())], 4))
        f.write(f"\n}};\nconst size_t kDecompositionsCount = {len(decomp)};\n\n")
        f.write("}  // namespace hypic::unicode_data\n")
    print(f"wrote {OUT}, {OUT_NFC}: {len(runs)} runs, {len(ccc_ranges)} ccc ranges, "
          f"{len(decomp)} decompositions ({sum(1 for v in decomp.values() if v[2])} compose), "
          f"{len(han_ranges)} Han ranges",
          file=sys.stderr)


if __name__ == "__main__":
    main()
