// Little-endian fields in byte strings: the values hypic writes to a store it does not own
// (Redis) are built with put_le and read back with ByteReader, which never reads past the end
// (a short or damaged value makes it fail, not crash).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace hypic {

template <typename T>
void put_le(std::string* s, T v) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  const U u = U(v);
  for (size_t i = 0; i < sizeof(T); ++i) s->push_back(char((u >> (8 * i)) & 0xff));
}

// A u32 length, then the bytes.
inline void put_bytes(std::string* s, std::string_view v) {
  put_le(s, uint32_t(v.size()));
  s->append(v);
}

class ByteReader {
 public:
  explicit ByteReader(std::string_view s) : s_(s) {}
  // False (and nothing read) when fewer than sizeof(T) bytes are left.
  template <typename T>
  bool get(T* v) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    if (s_.size() - pos_ < sizeof(T)) return false;
    U u = 0;
    for (size_t i = 0; i < sizeof(T); ++i) u |= U(uint8_t(s_[pos_ + i])) << (8 * i);
    pos_ += sizeof(T);
    *v = T(u);
    return true;
  }
  // A put_bytes() field of at most `max` bytes.
  bool bytes(std::string* v, size_t max) {
    uint32_t n = 0;
    if (!get(&n) || n > max || s_.size() - pos_ < n) return false;
    v->assign(s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t pos() const { return pos_; }
  size_t left() const { return s_.size() - pos_; }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace hypic
