#include "tokenizer/unicode.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace hypic::unicode {
namespace {

namespace ud = unicode_data;

constexpr uint32_t kMaxCp = 0x110000;
constexpr int kBlockBits = 7;
constexpr uint32_t kBlock = 1u << kBlockBits;

// Two-stage lookup built once from the run-length table: stage1[cp >> 7] -> block,
// blocks[block * 128 + (cp & 127)] -> flags. Identical blocks are stored once.
struct PropTable {
  std::vector<uint16_t> stage1;
  std::vector<uint8_t> blocks;

  PropTable() {
    std::vector<uint8_t> flat(kMaxCp, 0);
    for (size_t i = 0; i < ud::kPropRunsCount; ++i) {
      uint32_t first = ud::kPropRuns[i] >> 8;
      uint32_t last = i + 1 < ud::kPropRunsCount ? (ud::kPropRuns[i + 1] >> 8) : kMaxCp;
      std::fill(flat.begin() + first, flat.begin() + last, uint8_t(ud::kPropRuns[i] & 0xFF));
    }
    std::unordered_map<std::string, uint16_t> seen;
    stage1.resize(kMaxCp >> kBlockBits);
    for (uint32_t b = 0; b < (kMaxCp >> kBlockBits); ++b) {
      std::string key(reinterpret_cast<const char*>(flat.data()) + b * kBlock, kBlock);
      auto it = seen.find(key);
      if (it == seen.end()) {
        uint16_t idx = uint16_t(blocks.size() / kBlock);
        blocks.insert(blocks.end(), key.begin(), key.end());
        it = seen.emplace(std::move(key), idx).first;
      }
      stage1[b] = it->second;
    }
  }
};

const PropTable& prop_table() {
  static const PropTable t;
  return t;
}

struct NfcTables {
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> decomp;  // one step
  std::unordered_map<uint64_t, uint32_t> compose;                     // (a << 32 | b) -> c

  NfcTables() {
    decomp.reserve(ud::kDecompositionsCount * 2);
    for (size_t i = 0; i < ud::kDecompositionsCount; ++i) {
      const auto& d = ud::kDecompositions[i];
      decomp[d.cp] = {d.a, d.b};
      if (d.composes) compose[(uint64_t(d.a) << 32) | d.b] = d.cp;
    }
  }
};

const NfcTables& nfc_tables() {
  static const NfcTables t;
  return t;
}

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto& t = nfc_tables().decomp;
  auto it = t.find(cp);
  if (it == t.end()) {
    out.push_back(cp);
    return;
  }
  decompose(it->second.first, out);
  if (it->second.second) decompose(it->second.second, out);
}

uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto& t = nfc_tables().compose;
  auto it = t.find((uint64_t(a) << 32) | b);
  return it == t.end() ? 0 : it->second;
}

// NFC of one span of code points (UAX #15: decompose, canonical order, compose).
void nfc_span(std::string_view s, std::string& out) {
  thread_local std::vector<uint32_t> buf;
  buf.clear();
  for (size_t i = 0; i < s.size();) {
    int len;
    uint32_t cp = decode_valid(s.data(), i, &len);
    decompose(cp, buf);
    i += size_t(len);
  }
  // Canonical ordering: stable insertion sort inside each run of non-starters.
  for (size_t i = 1; i < buf.size(); ++i) {
    uint8_t c = combining_class(buf[i]);
    if (c == 0) continue;
    size_t j = i;
    while (j > 0) {
      uint8_t p = combining_class(buf[j - 1]);
      if (p == 0 || p <= c) break;
      std::swap(buf[j - 1], buf[j]);
      --j;
    }
  }
  // Canonical composition.
  if (!buf.empty()) {
    size_t starter = 0, w = 1;
    int last_class = combining_class(buf[0]) ? 256 : 0;
    bool have_starter = last_class == 0;
    for (size_t r = 1; r < buf.size(); ++r) {
      uint32_t ch = buf[r];
      int cls = combining_class(ch);
      uint32_t comp = have_starter ? compose_pair(buf[starter], ch) : 0;
      if (comp && (last_class < cls || last_class == 0)) {
        buf[starter] = comp;
        continue;
      }
      if (cls == 0) {
        starter = w;
        have_starter = true;
      }
      last_class = cls;
      buf[w++] = ch;
    }
    buf.resize(w);
  }
  for (uint32_t cp : buf) append_utf8(cp, out);
}

// 0: invalid lead byte; otherwise the sequence length.
inline int lead_length(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

// Valid range of the byte after lead byte c (Unicode Table 3-7); later bytes are 80..BF.
inline bool second_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

// At s[i]: returns the length of a valid sequence (> 0), or -(length of the maximal
// ill-formed subpart) (< 0), or 0 when the bytes run out before the sequence is decided.
inline int scan_sequence(const unsigned char* s, size_t n, size_t i) {
  unsigned char c = s[i];
  int len = lead_length(c);
  if (len == 1) return 1;
  if (len == 0) return -1;
  for (int k = 1; k < len; ++k) {
    if (i + size_t(k) >= n) return 0;
    unsigned char b = s[i + size_t(k)];
    bool ok = k == 1 ? second_ok(c, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return -k;
  }
  return len;
}

}  // namespace

uint8_t props(uint32_t cp) {
  const PropTable& t = prop_table();
  return t.blocks[size_t(t.stage1[cp >> kBlockBits]) * kBlock + (cp & (kBlock - 1))];
}

bool is_han(uint32_t cp) {
  if (cp < unicode_data::kHanRanges[0].first) return false;
  size_t lo = 0, hi = unicode_data::kHanRangesCount;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const auto& r = unicode_data::kHanRanges[mid];
    if (cp < r.first) hi = mid;
    else if (cp > r.last) lo = mid + 1;
    else return true;
  }
  return false;
}

uint8_t combining_class(uint32_t cp) {
  size_t lo = 0, hi = unicode_data::kCccRangesCount;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const auto& r = unicode_data::kCccRanges[mid];
    if (cp < r.first) hi = mid;
    else if (cp > r.last) lo = mid + 1;
    else return r.ccc;
  }
  return 0;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

size_t valid_utf8_prefix(std::string_view sv) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t n = sv.size(), i = 0;
  while (i < n) {
    // Skip ASCII eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    int r = scan_sequence(s, n, i);
    if (r <= 0) return i;
    i += size_t(r);
  }
  return n;
}

size_t append_lossy(std::string_view sv, std::string& out, bool final) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t n = sv.size(), i = 0;
  while (i < n) {
    size_t good = valid_utf8_prefix(sv.substr(i));
    out.append(sv.data() + i, good);
    i += good;
    if (i >= n) break;
    int r = scan_sequence(s, n, i);
    HYPIC_CHECK(r <= 0, "valid_utf8_prefix stopped at a valid sequence");
    if (r == 0) {  // incomplete at the end
      if (!final) return i;
      append_utf8(kReplacementChar, out);
      return n;
    }
    append_utf8(kReplacementChar, out);
    i += size_t(-r);
  }
  return n;
}

bool nfc_quick_check(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    if (p[i] < 0x80) { ++i; continue; }
    int len;
    uint32_t cp = decode_valid(s.data(), i, &len);
    if (props(cp) & unicode_data::kFlagNfcUnsafe) return false;
    i += size_t(len);
  }
  return true;
}

void append_nfc(std::string_view s, std::string& out) {
  size_t copied = 0;    // s[0, copied) has been written to out
  size_t boundary = 0;  // start of the last safe character (or `copied`)
  size_t i = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    if (p[i] < 0x80) { boundary = i++; continue; }
    int len;
    uint32_t cp = decode_valid(s.data(), i, &len);
    if (!(props(cp) & unicode_data::kFlagNfcUnsafe)) {
      boundary = i;
      i += size_t(len);
      continue;
    }
    // Rewrite from the last safe character up to (not including) the next one.
    size_t start = std::max(boundary, copied);
    size_t end = i + size_t(len);
    while (end < s.size()) {
      int l2;
      uint32_t c2 = decode_valid(s.data(), end, &l2);
      if (!(props(c2) & unicode_data::kFlagNfcUnsafe)) break;
      end += size_t(l2);
    }
    out.append(s.data() + copied, start - copied);
    nfc_span(s.substr(start, end - start), out);
    copied = end;
    boundary = end;
    i = end;
  }
  out.append(s.data() + copied, s.size() - copied);
}

}  // namespace hypic::unicode
