#include "core/hash.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HYPIC_SHA_X86 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#define HYPIC_SHA_ARM 1
#endif

namespace hypic {
namespace {

// ---------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4 §6.2)

constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void blocks_portable(uint32_t h[8], const uint8_t* p, size_t nblocks) {
  for (; nblocks > 0; --nblocks, p += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 |
             uint32_t(p[4 * i + 2]) << 8 | uint32_t(p[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                          kK[i] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }
}

#ifdef HYPIC_SHA_X86
// SHA extensions (Intel "SHA-NI"): the layout of the state follows Intel's reference
// (ABEF / CDGH in two registers), as in the Linux kernel's sha256_ni_asm.S.
__attribute__((target("sha,sse4.1,ssse3"))) void blocks_shani(uint32_t h[8], const uint8_t* p,
                                                              size_t nblocks) {
  const __m128i kShuf = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&h[0]));    // DCBA
  __m128i st1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&h[4]));    // HGFE
  tmp = _mm_shuffle_epi32(tmp, 0xB1);                                        // CDAB
  st1 = _mm_shuffle_epi32(st1, 0x1B);                                        // EFGH
  __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);                                // ABEF
  st1 = _mm_blend_epi16(st1, tmp, 0xF0);                                     // CDGH

  const __m128i* K = reinterpret_cast<const __m128i*>(kK);
  for (; nblocks > 0; --nblocks, p += 64) {
    const __m128i save0 = st0, save1 = st1;
    __m128i m[4];
    for (int i = 0; i < 4; ++i)
      m[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)),
                              kShuf);
    // 16 groups of 4 rounds; message schedule on the fly (m[i % 4] holds W[4i .. 4i+3]).
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      __m128i msg = _mm_add_epi32(m[i & 3], _mm_loadu_si128(K + i));
      st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
      msg = _mm_shuffle_epi32(msg, 0x0E);
      st0 = _mm_sha256rnds2_epu32(st0, st1, msg);
      if (i >= 3 && i < 15) {
        // W[4(i+1) ..] = f(W[4(i-3)..], W[4(i-2)..], W[4(i-1)..], W[4i..])
        __m128i& next = m[(i + 1) & 3];  // holds W[4(i-3)..]
        next = _mm_sha256msg1_epu32(next, m[(i + 2) & 3]);
        next = _mm_add_epi32(next, _mm_alignr_epi8(m[i & 3], m[(i + 3) & 3], 4));
        next = _mm_sha256msg2_epu32(next, m[i & 3]);
      }
    }
    st0 = _mm_add_epi32(st0, save0);
    st1 = _mm_add_epi32(st1, save1);
  }
  tmp = _mm_shuffle_epi32(st0, 0x1B);                 // FEBA
  st1 = _mm_shuffle_epi32(st1, 0xB1);                 // DCHG
  st0 = _mm_blend_epi16(tmp, st1, 0xF0);              // DCBA
  st1 = _mm_alignr_epi8(st1, tmp, 8);                 // HGFE
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&h[0]), st0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&h[4]), st1);
}

bool cpu_has_sha() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool sse41 = c & bit_SSE4_1, ssse3 = c & bit_SSSE3;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return sse41 && ssse3 && (b & bit_SHA);
}
#endif

#ifdef HYPIC_SHA_ARM
// ARMv8 SHA-256 instructions (FEAT_SHA256, HWCAP_SHA2): the state as ABCD / EFGH, four
// rounds per sha256h / sha256h2 pair, the message schedule by sha256su0 / su1.
__attribute__((target("+crypto"))) void blocks_armv8(uint32_t h[8], const uint8_t* p, size_t nblocks) {
  uint32x4_t st0 = vld1q_u32(&h[0]), st1 = vld1q_u32(&h[4]);
  for (; nblocks > 0; --nblocks, p += 64) {
    const uint32x4_t save0 = st0, save1 = st1;
    uint32x4_t m[4];
    for (int i = 0; i < 4; ++i) m[i] = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(p + 16 * i)));
    // 16 groups of 4 rounds; m[i % 4] holds W[4i .. 4i+3], then W[4(i+4) ..].
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      const uint32x4_t wk = vaddq_u32(m[i & 3], vld1q_u32(kK + 4 * i));
      if (i < 12)
        m[i & 3] = vsha256su1q_u32(vsha256su0q_u32(m[i & 3], m[(i + 1) & 3]), m[(i + 2) & 3], m[(i + 3) & 3]);
      const uint32x4_t abcd = st0;
      st0 = vsha256hq_u32(st0, st1, wk);
      st1 = vsha256h2q_u32(st1, abcd, wk);
    }
    st0 = vaddq_u32(st0, save0);
    st1 = vaddq_u32(st1, save1);
  }
  vst1q_u32(&h[0], st0);
  vst1q_u32(&h[4], st1);
}
#endif

using BlockFn = void (*)(uint32_t*, const uint8_t*, size_t);
BlockFn pick_blocks() {
#ifdef HYPIC_SHA_X86
  if (cpu_has_sha()) return blocks_shani;
#endif
#ifdef HYPIC_SHA_ARM
  if (getauxval(AT_HWCAP) & HWCAP_SHA2) return blocks_armv8;
#endif
  return blocks_portable;
}
std::atomic<BlockFn> g_blocks{pick_blocks()};

// ---------------------------------------------------------------------------------------
// XXH64 (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md)

constexpr uint64_t P1 = 0x9E3779B185EBCA87ULL, P2 = 0xC2B2AE3D27D4EB4FULL,
                   P3 = 0x165667B19E3779F9ULL, P4 = 0x85EBCA77C2B2AE63ULL,
                   P5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian host (x86-64, aarch64)
}
inline uint32_t read32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t round64(uint64_t acc, uint64_t in) {
  acc += in * P2;
  acc = rotl64(acc, 31);
  return acc * P1;
}
inline uint64_t merge64(uint64_t acc, uint64_t v) {
  acc ^= round64(0, v);
  return acc * P1 + P4;
}
// Consumes whole 32-byte stripes; returns the bytes consumed.
inline size_t stripes(uint64_t v[4], const uint8_t* p, size_t n) {
  const uint8_t* const start = p;
  uint64_t a = v[0], b = v[1], c = v[2], d = v[3];
  for (; n >= 32; n -= 32, p += 32) {
    a = round64(a, read64(p));
    b = round64(b, read64(p + 8));
    c = round64(c, read64(p + 16));
    d = round64(d, read64(p + 24));
  }
  v[0] = a, v[1] = b, v[2] = c, v[3] = d;
  return size_t(p - start);
}

uint64_t finish64(uint64_t h, const uint8_t* p, size_t n) {
  for (; n >= 8; n -= 8, p += 8) h = rotl64(h ^ round64(0, read64(p)), 27) * P1 + P4;
  if (n >= 4) {
    h = rotl64(h ^ (uint64_t(read32(p)) * P1), 23) * P2 + P3;
    p += 4;
    n -= 4;
  }
  for (; n > 0; --n, ++p) h = rotl64(h ^ (uint64_t(*p) * P5), 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

constexpr char kHex[] = "0123456789abcdef";

}  // namespace

std::string to_hex(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kHex[p[i] >> 4];
    s[2 * i + 1] = kHex[p[i] & 15];
  }
  return s;
}

std::string to_hex64(uint64_t v) {
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[size_t(i)] = kHex[v & 15];
  return s;
}

// ---------------------------------------------------------------------------------------

void Sha256::reset() {
  static constexpr uint32_t kInit[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::memcpy(h_, kInit, sizeof h_);
  buf_len_ = 0;
  total_ = 0;
}

void Sha256::update(const void* data, size_t n) {
  if (n == 0) return;  // data may then be null (an empty vector's data()): no memcpy from it
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const BlockFn blocks = g_blocks.load(std::memory_order_relaxed);
  total_ += n;
  if (buf_len_ > 0) {
    const size_t take = std::min(n, 64 - buf_len_);
    std::memcpy(buf_ + buf_len_, p, take);
    buf_len_ += take;
    p += take;
    n -= take;
    if (buf_len_ < 64) return;
    blocks(h_, buf_, 1);
    buf_len_ = 0;
  }
  if (n >= 64) {
    blocks(h_, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
  }
  std::memcpy(buf_, p, n);
  buf_len_ = n;
}

void Sha256::final(uint8_t out[kDigestBytes]) {
  const uint64_t bits = total_ * 8;
  uint8_t pad[72] = {0x80};
  const size_t pad_len = (buf_len_ < 56 ? 56 : 120) - buf_len_;
  for (int i = 0; i < 8; ++i) pad[pad_len + size_t(i)] = uint8_t(bits >> (56 - 8 * i));
  update(pad, pad_len + 8);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = uint8_t(h_[i] >> (24 - 8 * j));
}

std::string Sha256::final_hex() {
  uint8_t d[kDigestBytes];
  final(d);
  return to_hex(d, sizeof d);
}

std::string Sha256::hex(const void* data, size_t n) {
  Sha256 s;
  s.update(data, n);
  return s.final_hex();
}

const char* Sha256::implementation() {
  const BlockFn f = g_blocks.load();
#ifdef HYPIC_SHA_ARM
  if (f == blocks_armv8) return "armv8-sha2";
#endif
  return f == blocks_portable ? "portable" : "sha-ni";
}

void Sha256::use_portable_for_testing(bool portable) {
  g_blocks.store(portable ? blocks_portable : pick_blocks());
}

// ---------------------------------------------------------------------------------------

void Xxh64::reset(uint64_t seed) {
  seed_ = seed;
  v_[0] = seed + P1 + P2;
  v_[1] = seed + P2;
  v_[2] = seed;
  v_[3] = seed - P1;
  total_ = 0;
  buf_len_ = 0;
}

void Xxh64::update(const void* data, size_t n) {
  if (n == 0) return;  // data may then be null (an empty vector's data()): no memcpy from it
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (buf_len_ > 0) {
    const size_t take = std::min(n, 32 - buf_len_);
    std::memcpy(buf_ + buf_len_, p, take);
    buf_len_ += take;
    p += take;
    n -= take;
    if (buf_len_ < 32) return;
    stripes(v_, buf_, 32);
    buf_len_ = 0;
  }
  const size_t used = stripes(v_, p, n);
  p += used;
  n -= used;
  std::memcpy(buf_, p, n);
  buf_len_ = n;
}

uint64_t Xxh64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl64(v_[0], 1) + rotl64(v_[1], 7) + rotl64(v_[2], 12) + rotl64(v_[3], 18);
    for (int i = 0; i < 4; ++i) h = merge64(h, v_[i]);
  } else {
    h = seed_ + P5;
  }
  h += total_;
  return finish64(h, buf_, buf_len_);
}

uint64_t Xxh64::hash(const void* data, size_t n, uint64_t seed) {
  Xxh64 x(seed);
  x.update(data, n);
  return x.digest();
}

}  // namespace hypic
