#include "model/quantize_model.h"

#include "model/model.h"

namespace hypic {

Result<std::set<std::string>> loaded_matrix_names(const std::string& dir, DType t, bool progress) {
  std::set<std::string> mats;
  LoadOptions lo;
  lo.compute = t;
  lo.progress = progress;
  lo.matrix_names = &mats;
  HYPIC_ASSIGN_OR_RETURN(auto model, Model::load(dir, lo));
  return mats;
}

Status quantize_model(const std::string& dir, const std::string& out, const QuantizeOptions& o) {
  return quantize_checkpoint(dir, out, o, [&] { return loaded_matrix_names(dir, o.dtype, o.progress); });
}

}  // namespace hypic
