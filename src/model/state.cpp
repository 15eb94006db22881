#include "model/state.h"

namespace hypic {

SeqState SeqState::copy() const {
  SeqState s;
  s.pos = pos;
  for (const auto& l : linear) s.linear.push_back({l.conv.clone(), l.ssm.clone()});
  for (const auto& c : kv) s.kv.push_back({c.k.clone(), c.v.clone()});
  return s;
}

size_t SeqState::bytes() const {
  size_t b = 0;
  for (const auto& l : linear) b += l.conv.nbytes() + l.ssm.nbytes();
  for (const auto& c : kv) b += c.k.nbytes() + c.v.nbytes();
  return b;
}

}  // namespace hypic
