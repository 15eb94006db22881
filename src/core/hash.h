// Hashes over bytes:
//  * SHA-256 (FIPS 180-4): identities that must not collide, even adversarially (segment
//    keys). Runtime dispatch: x86 SHA extensions or ARMv8 SHA-256 instructions when the CPU
//    has them, else portable code.
//  * XXH64 (xxHash 64-bit, seed 0 by default): a fast non-cryptographic checksum for
//    detecting accidental corruption of large tensor data (disk tier). It is not a defence
//    against an attacker who can write the files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hypic {

class Sha256 {
 public:
  static constexpr size_t kDigestBytes = 32;
  Sha256() { reset(); }
  void reset();
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Writes the 32-byte digest; the object must be reset() before it is used again.
  void final(uint8_t out[kDigestBytes]);
  std::string final_hex();  // 64 lowercase hex characters

  static std::string hex(const void* data, size_t n);
  static std::string hex(std::string_view s) { return hex(s.data(), s.size()); }
  // "sha-ni", "armv8-sha2" or "portable": the block function this CPU uses.
  static const char* implementation();
  // Tests: force the portable block function, or restore the dispatched one (both give the
  // same digests, so switching while other threads hash is harmless).
  static void use_portable_for_testing(bool portable);

 private:
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;  // bytes
};

class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0) { reset(seed); }
  void reset(uint64_t seed = 0);
  void update(const void* data, size_t n);
  // Does not modify the state: more data may follow.
  uint64_t digest() const;

  static uint64_t hash(const void* data, size_t n, uint64_t seed = 0);

 private:
  uint64_t v_[4];
  uint64_t seed_ = 0;
  uint64_t total_ = 0;
  uint8_t buf_[32];
  size_t buf_len_ = 0;
};

// Lowercase hex of n bytes / of a 64-bit value (16 digits, most significant first).
std::string to_hex(const void* data, size_t n);
std::string to_hex64(uint64_t v);

}  // namespace hypic
