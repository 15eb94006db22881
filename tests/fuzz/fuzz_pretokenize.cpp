// The tokenizer's pre-tokeniser (src/tokenizer/pretokenize.h) and the UTF-8 / NFC helpers in
// front of it (src/tokenizer/unicode.h) on arbitrary bytes.
//
// next_piece / for_each_piece require valid UTF-8 (they decode without bounds checks, as
// TokenizerImpl::encode only ever passes text repaired by append_lossy and, with an NFC
// normalizer, normalised by append_nfc). So the raw bytes are split only when they are
// valid UTF-8; the repaired text and its NFC form always are, as the tokenizer does.
// For every Pattern the pieces must be non-empty, contiguous, end on character boundaries
// and cover the text exactly, and next_piece must always advance.
// UTF-8 helpers: the repair is valid UTF-8, leaves valid text unchanged, and gives the same
// result when the input arrives in two chunks (final = false, then the rest); NFC output
// is valid UTF-8 and normalising it again changes nothing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

namespace {

namespace pretok = hypic::pretok;
namespace unicode = hypic::unicode;

bool valid_utf8(std::string_view s) { return unicode::valid_utf8_prefix(s) == s.size(); }

void check_pieces(pretok::Pattern p, std::string_view text) {
  // next_piece directly.
  size_t count = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t e = pretok::next_piece(p, text, i);
    FUZZ_CHECK(e > i && e <= text.size(), "%s: next_piece(%zu) = %zu of %zu bytes",
               pretok::pattern_name(p), i, e, text.size());
    FUZZ_CHECK(valid_utf8(text.substr(i, e - i)), "%s: piece [%zu, %zu) splits a character",
               pretok::pattern_name(p), i, e);
    i = e;
    ++count;
  }
  // for_each_piece gives the same tiling.
  size_t pos = 0, seen = 0;
  pretok::for_each_piece(p, text, [&](std::string_view piece) {
    FUZZ_CHECK(!piece.empty(), "%s: empty piece at %zu", pretok::pattern_name(p), pos);
    FUZZ_CHECK(piece.data() == text.data() + pos, "%s: piece not contiguous at %zu",
               pretok::pattern_name(p), pos);
    pos += piece.size();
    ++seen;
  });
  FUZZ_CHECK(pos == text.size(), "%s: pieces cover %zu of %zu bytes", pretok::pattern_name(p),
             pos, text.size());
  FUZZ_CHECK(seen == count);
}

void check_all_patterns(std::string_view text) {
  for (pretok::Pattern p : pretok::all_patterns()) check_pieces(p, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  const bool valid = valid_utf8(raw);

  // Repair (what TokenizerImpl::encode does first).
  std::string repaired;
  FUZZ_CHECK(unicode::append_lossy(raw, repaired) == size);
  FUZZ_CHECK(valid_utf8(repaired));
  FUZZ_CHECK(!valid || repaired == raw, "valid UTF-8 changed by the repair");

  // The same repair in two chunks (the incremental decoder's use): the first call holds
  // back at most an incomplete sequence at its end.
  if (size > 0) {
    const size_t cut = size_t(data[0]) % (size + 1);
    std::string chunked;
    const size_t used = unicode::append_lossy(raw.substr(0, cut), chunked, /*final=*/false);
    FUZZ_CHECK(used <= cut && cut - used <= 3, "held back %zu of %zu bytes", cut - used, cut);
    unicode::append_lossy(raw.substr(used), chunked, /*final=*/true);
    FUZZ_CHECK(chunked == repaired, "chunked repair (cut at %zu) differs", cut);
  }

  // NFC (the normalizer of NFC tokenizers).
  std::string nfc;
  unicode::append_nfc(repaired, nfc);
  FUZZ_CHECK(valid_utf8(nfc));
  FUZZ_CHECK(!unicode::nfc_quick_check(repaired) || nfc == repaired,
             "quick check passed but NFC changed the text");
  std::string nfc2;
  unicode::append_nfc(nfc, nfc2);
  FUZZ_CHECK(nfc2 == nfc, "NFC is not idempotent");

  if (valid) check_all_patterns(raw);
  else check_all_patterns(repaired);
  if (nfc != repaired) check_all_patterns(nfc);
  return 0;
}
