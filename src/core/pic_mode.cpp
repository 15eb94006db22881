#include "core/pic_mode.h"

namespace hypic {

const char* pic_mode_name(PicMode m) {
  switch (m) {
    case PicMode::kFull: return "full";
    case PicMode::kPrefix: return "prefix";
    case PicMode::kHypic: return "hypic";
    case PicMode::kNaive: return "naive";
  }
  return "?";
}

bool parse_pic_mode(const std::string& s, PicMode* m) {
  for (PicMode x : {PicMode::kFull, PicMode::kPrefix, PicMode::kHypic, PicMode::kNaive})
    if (s == pic_mode_name(x)) {
      *m = x;
      return true;
    }
  return false;
}

}  // namespace hypic
