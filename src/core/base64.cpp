#include "core/base64.h"

namespace hypic {
namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string base64_encode(const uint8_t* p, size_t n) {
  std::string s;
  s.reserve((n + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = uint32_t(p[i]) << 16 | uint32_t(p[i + 1]) << 8 | p[i + 2];
    for (int k = 3; k >= 0; --k) s += kB64[(v >> (6 * k)) & 63];
  }
  if (n - i == 1) {
    const uint32_t v = uint32_t(p[i]) << 16;
    s += kB64[v >> 18];
    s += kB64[(v >> 12) & 63];
    s += "==";
  } else if (n - i == 2) {
    const uint32_t v = uint32_t(p[i]) << 16 | uint32_t(p[i + 1]) << 8;
    s += kB64[v >> 18];
    s += kB64[(v >> 12) & 63];
    s += kB64[(v >> 6) & 63];
    s += '=';
  }
  return s;
}

// Strict: canonical padding only, unused bits zero; false on anything else.
bool base64_decode(std::string_view s, std::vector<uint8_t>* out) {
  if (s.size() % 4 != 0) return false;
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out->clear();
  out->reserve(s.size() / 4 * 3);
  for (size_t i = 0; i < s.size(); i += 4) {
    const bool last = i + 4 == s.size();
    const int pad = last ? (s[i + 3] == '=') + (s[i + 2] == '=') : 0;
    if (pad == 1 && s[i + 2] == '=') return false;  // "x=y=" style
    uint32_t v = 0;
    for (int k = 0; k < 4 - pad; ++k) {
      const int d = val(s[i + size_t(k)]);
      if (d < 0) return false;
      v = v << 6 | uint32_t(d);
    }
    v <<= 6 * pad;
    if (pad == 2 && (v & 0xffff) != 0) return false;
    if (pad == 1 && (v & 0xff) != 0) return false;
    out->push_back(uint8_t(v >> 16));
    if (pad < 2) out->push_back(uint8_t(v >> 8));
    if (pad < 1) out->push_back(uint8_t(v));
  }
  return true;
}

}  // namespace hypic
