// The tiktoken loader (src/tokenizer/tiktoken_load.cpp: a rank file and its
// tokenizer_config.json, both from outside) on arbitrary bytes, then the tokenizer it builds.
//
// Input: byte 0 picks the config. 0: the rest is "<tokenizer_config.json>\0<rank file>" (both
// fuzzed; without a NUL all of it is the rank file and the config is empty). 1: Kimi's profile
// (tokenization_kimi.TikTokenTokenizer) with two named specials, 2: hypic_tiktoken with the
// Qwen3.5 pattern and NFC, 3: hypic_tiktoken with the o200k pattern; the rest is the rank file.
// Loading must return a Status, never crash. A tokenizer that loads must round-trip text:
// decode(encode(t)) == t for valid UTF-8 t (the NFC form of t with NFC), special tokens parsed
// or not; encode must give known ids only.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using hypic::Tokenizer;
namespace unicode = hypic::unicode;

constexpr const char* kKimiConfig =
    R"({"tokenizer_class": "TikTokenTokenizer", "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", null]},
        "added_tokens_decoder": {"256": {"content": "[BOS]", "special": true},
                                 "258": {"content": "<|im_end|>", "special": true},
                                 "269": {"content": "<|tool_call_begin|>", "special": false}}})";
constexpr const char* kQwenConfig =
    R"({"hypic_tiktoken": {"pattern": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "normalizer": "NFC"},
        "added_tokens_decoder": {"300": {"content": "<|endoftext|>", "special": true}}})";
constexpr const char* kO200kConfig =
    R"({"hypic_tiktoken": {"pattern": "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "reserved_special_tokens": 3}})";

const char* const kTexts[] = {
    "Hello, world! It's 2024.\n\n  tabs\there",
    "\xe4\xb8\xad\xe6\x96\x87\xe4\xb8\x96\xe7\x95\x8c English \xe6\x97\xa5\xe6\x9c\xac I'M DONE",
    "cafe\xcc\x81 na\xc3\xafve \xf0\x9f\x98\x80\xe2\x80\x8d<|im_end|>[BOS]<|tool_call_begin|><|endoftext|>",
};

void check_round_trip(const Tokenizer& tok, std::string_view text, bool nfc) {
  std::string want;
  if (nfc) unicode::append_nfc(text, want);
  else want = std::string(text);
  for (bool parse : {true, false}) {
    const auto ids = tok.encode(text, parse);
    for (int32_t id : ids) FUZZ_CHECK(tok.is_known(id), "unknown id %d", int(id));
    const std::string back = tok.decode(ids);
    FUZZ_CHECK(back == want, "round trip (parse_special=%d) of a %zu-byte text gave %zu bytes",
               int(parse), text.size(), back.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string_view config, ranks = input;
  bool nfc = false;
  switch (data[0] % 4) {
    case 0: {
      const size_t nul = input.find('\0');
      if (nul != std::string_view::npos) {
        config = input.substr(0, nul);
        ranks = input.substr(nul + 1);
      }
      break;
    }
    case 1: config = kKimiConfig; break;
    case 2: config = kQwenConfig; nfc = true; break;
    default: config = kO200kConfig; break;
  }
  auto tok = Tokenizer::from_tiktoken(ranks, config, "fuzz.tiktoken", "fuzz_config.json");
  if (!tok.is_ok()) {
    FUZZ_CHECK(!tok.status().message().empty());
    return 0;
  }
  const std::string summary = tok.value().summary();
  if (data[0] % 4 == 0) nfc = summary.find("normalizer NFC") != std::string::npos;
  for (const char* t : kTexts) check_round_trip(tok.value(), t, nfc);
  // Some of the input itself, repaired to valid UTF-8 (at most 2 KiB: the BPE is per piece).
  std::string repaired;
  unicode::append_lossy(ranks.substr(0, 2048), repaired);
  check_round_trip(tok.value(), repaired, nfc);
  return 0;
}
