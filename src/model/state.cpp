#include "model/state.h"

namespace hypic {
namespace {

std::vector<NamedTensor> clone_all(const std::vector<NamedTensor>& v) {
  std::vector<NamedTensor> out;
  out.reserve(v.size());
  for (const NamedTensor& n : v) out.push_back({n.name, n.t.clone()});
  return out;
}

}  // namespace

size_t LayerState::bytes() const {
  size_t b = 0;
  for (const NamedTensor& n : fixed) b += n.t.nbytes();
  for (const NamedTensor& n : rows) b += n.t.nbytes();
  return b;
}

int64_t SeqState::capacity() const {
  for (const LayerState& l : layers)
    if (!l.rows.empty()) return l.rows[0].t.dim(0);
  return 0;
}

SeqState SeqState::copy() const {
  SeqState s;
  s.pos = pos;
  s.layers.reserve(layers.size());
  for (const LayerState& l : layers) s.layers.push_back({clone_all(l.fixed), clone_all(l.rows)});
  return s;
}

size_t SeqState::bytes() const {
  size_t b = 0;
  for (const LayerState& l : layers) b += l.bytes();
  return b;
}

}  // namespace hypic
