#include "engine/model_types.h"

namespace fuserank::engine {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "fp32";
    case DType::kF16:
      return "fp16";
    case DType::kBF16:
      return "bf16";
    case DType::kInt8:
      return "int8";
  }
  return "?";
}

std::string_view InteractionName(Interaction interaction) {
  switch (interaction) {
    case Interaction::kConcat:
      return "concat";
    case Interaction::kDot:
      return "dot";
    case Interaction::kLinear:
      return "linear";
    case Interaction::kDcn:
      return "dcn";
  }
  return "?";
}

int DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kInt8:
      return 1;
  }
  return 0;
}

bool ModelSpec::has_remote_tables() const {
  for (const TableSpec& t : tables) {
    if (t.remote()) return true;
  }
  return false;
}

int ModelSpec::z_width() const {
  if (dense_total() == 0) return 0;
  return bottom_mlp.empty() ? dense_total() : bottom_mlp.back();
}

int ModelSpec::concat_width() const {
  int width = z_width();
  for (const TableSpec& t : tables) width += t.dim;
  return width;
}

int ModelSpec::dot_vectors() const {
  return static_cast<int>(tables.size()) + (z_width() > 0 ? 1 : 0);
}

int ModelSpec::interaction_width() const {
  switch (interaction) {
    case Interaction::kConcat:
    case Interaction::kLinear:  // the cross is folded into top_mlp[0]
    case Interaction::kDcn:     // x_L is as wide as x0 = concat(V)
      return concat_width();
    case Interaction::kDot: {
      const int n = dot_vectors();
      return z_width() + n * (n - 1) / 2;
    }
  }
  return 0;
}

}  // namespace fuserank::engine
