// segment_key (entry/segment_entry.h): a segment's identity in every cache tier.
#include <string_view>

#include "checkpoint/safetensors.h"
#include "core/hash.h"
#include "entry/segment_entry.h"

namespace hypic {
namespace {

void put_u64(Sha256& h, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = uint8_t(v >> (8 * i));
  h.update(b, 8);
}
void put_str(Sha256& h, std::string_view s) {
  put_u64(h, s.size());
  h.update(s);
}

}  // namespace

std::string segment_key(const std::string& model_fingerprint, DType dtype, int seam,
                        const std::string& salt, const std::vector<int32_t>& tokens) {
  // Every variable-length field is length-prefixed, so no two inputs share an encoding.
  Sha256 h;
  put_str(h, "hypic.segment_key.v1");
  put_str(h, model_fingerprint);
  put_str(h, safetensors_dtype_name(dtype));
  put_u64(h, uint64_t(int64_t(seam)));
  put_str(h, salt);
  put_u64(h, tokens.size());
  uint8_t buf[4096];
  size_t n = 0;
  for (int32_t t : tokens) {
    for (int k = 0; k < 4; ++k) buf[n++] = uint8_t(uint32_t(t) >> (8 * k));
    if (n == sizeof buf) {
      h.update(buf, n);
      n = 0;
    }
  }
  h.update(buf, n);
  return h.final_hex();
}

}  // namespace hypic
