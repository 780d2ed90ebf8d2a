// Model loading: the spec's sizes are checked against the weights file and the memory limit
// first; then the file is read into a private copy, every tensor SPEC section 2 names is
// checked (dtype, shape, byte count, finite values) against the spec, dense layers are
// copied out (they are small and read constantly), embedding tables stay in the copy, and
// a linear cross is folded into top_mlp[0]; dcn cross layers are copied out like the MLPs.
#include "engine/model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "engine/error_list.h"
#include "engine/escape_text.h"
#include "engine/mapped_file.h"
#include "engine/model_checks.h"
#include "engine/regular_file.h"
#include "engine/safetensors.h"
#include "engine/status_macros.h"

namespace fuserank::engine {
namespace {

std::string Describe(absl::string_view dtype, const std::vector<int64_t>& shape) {
  return absl::StrCat(dtype, " [", absl::StrJoin(shape, ", "), "]");
}

// Extra tensors named in a message; the rest are counted.
constexpr size_t kListedExtras = 10;

// Checks tensors by name against the spec, remembering which ones the spec used and
// collecting every problem so one load reports them all.
class TensorChecker {
 public:
  explicit TensorChecker(const TensorMap& tensors) : tensors_(tensors) {}

  // The tensor `name` if it exists with `dtype` and `shape`, else nullptr (problem noted).
  const TensorView* Get(const std::string& name, absl::string_view dtype,
                        const std::vector<int64_t>& shape) {
    used_.insert(name);
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      Problem(
          absl::StrCat("tensor '", name, "' is missing (expected ", Describe(dtype, shape), ")"));
      return nullptr;
    }
    const TensorView& t = it->second;
    if (t.dtype != dtype || t.shape != shape) {
      Problem(absl::StrCat("tensor '", name, "': expected ", Describe(dtype, shape), ", got ",
                           Describe(t.dtype, t.shape)));
      return nullptr;
    }
    size_t bytes = SafetensorsDTypeSize(std::string_view(dtype.data(), dtype.size()));
    for (int64_t d : shape) bytes *= static_cast<size_t>(d);
    if (t.nbytes != bytes || (bytes > 0 && t.data == nullptr)) {
      Problem(absl::StrCat("tensor '", name, "': holds ", t.nbytes, " bytes, ",
                           Describe(dtype, shape), " needs ", bytes));
      return nullptr;
    }
    return &t;
  }

  // Copies a float32 layer `prefix`.weight [out, in] and `prefix`.bias [out].
  DenseLayer Layer(const std::string& prefix, int in, int out, bool relu) {
    DenseLayer layer;
    layer.in = in;
    layer.out = out;
    layer.relu = relu;
    const TensorView* w = Get(prefix + ".weight", "F32", {out, in});
    const TensorView* b = Get(prefix + ".bias", "F32", {out});
    if (w != nullptr) layer.weight = CopyFloats(prefix + ".weight", *w);
    if (b != nullptr) layer.bias = CopyFloats(prefix + ".bias", *b);
    return layer;
  }

  // dcn.<l>: V.weight [R, d0] and U.weight [d0, R] (low rank) or W.weight [d0, d0], bias [d0].
  CrossLayer Cross(int l, int d0, int rank) {
    const std::string prefix = absl::StrCat("dcn.", l);
    CrossLayer layer;
    layer.up.in = rank > 0 ? rank : d0;
    layer.up.out = d0;
    layer.up.relu = false;
    if (rank > 0) {
      layer.down = {.in = d0, .out = rank, .relu = false, .weight = {}, .bias = {}};
      layer.down.bias.assign(rank, 0.0f);
      Floats(prefix + ".V.weight", {rank, d0}, &layer.down.weight);
      Floats(prefix + ".U.weight", {d0, rank}, &layer.up.weight);
    } else {
      Floats(prefix + ".W.weight", {d0, d0}, &layer.up.weight);
    }
    Floats(prefix + ".bias", {d0}, &layer.up.bias);
    return layer;
  }

  // Tensors present but named by no part of the spec (most likely a typo). The first
  // kListedExtras are named, the rest counted, so the message stays short enough to log.
  void CheckNoExtras() {
    std::vector<std::string> extra;
    size_t unlisted = 0;
    for (const auto& [name, view] : tensors_) {
      if (used_.count(name)) continue;
      if (extra.size() < kListedExtras) {
        extra.push_back(absl::StrCat("'", EscapeText(name, 128), "'"));
      } else {
        ++unlisted;
      }
    }
    if (extra.empty()) return;
    Problem(absl::StrCat("tensors not in the spec: ", absl::StrJoin(extra, ", "),
                         unlisted > 0 ? absl::StrCat(" ... and ", unlisted, " more") : ""));
  }

  void Problem(absl::string_view message) { problems_.AddLine(message); }
  absl::Status ToStatus() const { return problems_.ToStatus("; "); }

 private:
  // Copies the float32 tensor `name` of `shape` to `out` when it is there and well formed.
  void Floats(const std::string& name, const std::vector<int64_t>& shape, std::vector<float>* out) {
    const TensorView* t = Get(name, "F32", shape);
    if (t != nullptr) *out = CopyFloats(name, *t);
  }

  std::vector<float> CopyFloats(const std::string& name, const TensorView& t) {
    std::vector<float> out(t.nbytes / sizeof(float));
    if (!out.empty()) std::memcpy(out.data(), t.data, t.nbytes);  // any alignment
    for (size_t i = 0; i < out.size(); ++i) {
      if (!std::isfinite(out[i])) {
        Problem(absl::StrCat("tensor '", name, "': element ", i, " is ", out[i]));
        break;
      }
    }
    return out;
  }

  const TensorMap& tensors_;
  std::set<std::string> used_;
  ErrorList problems_;
};

absl::Status NonFiniteFold(absl::string_view what, int row, int column, double value) {
  return absl::InvalidArgumentError(absl::StrCat(
      "folding cross.weight and cross.bias into top_mlp.0.weight and top_mlp.0.bias gives a ", what,
      " that is not a finite float32 (", value, " at row ", row,
      column >= 0 ? absl::StrCat(", column ", column) : "",
      "): the cross and top_mlp.0 values are too large for interaction: linear"));
}

// top_mlp[0] applied after the linear cross, as one layer over concat(V):
// W = W_top1 * W_cross, b = W_top1 * b_cross + b_top1, summed in double. Finite factors can
// give a product past float's range: that is refused, as a non-finite tensor is.
absl::StatusOr<DenseLayer> FoldCross(const DenseLayer& cross, const DenseLayer& top0) {
  const int in = cross.in, k_dim = cross.out, out = top0.out;
  DenseLayer folded;
  folded.in = in;
  folded.out = out;
  folded.relu = top0.relu;
  folded.weight.resize(static_cast<size_t>(out) * in);
  folded.bias.resize(out);
  std::vector<double> row(in);
  for (int o = 0; o < out; ++o) {
    std::fill(row.begin(), row.end(), 0.0);
    double bias = top0.bias[o];
    for (int k = 0; k < k_dim; ++k) {
      const double a = top0.weight[static_cast<size_t>(o) * k_dim + k];
      const float* wc = &cross.weight[static_cast<size_t>(k) * in];
      for (int c = 0; c < in; ++c) row[c] += a * wc[c];
      bias += a * cross.bias[k];
    }
    for (int c = 0; c < in; ++c) {
      const float w = static_cast<float>(row[c]);
      if (!std::isfinite(w)) return NonFiniteFold("weight", o, c, row[c]);
      folded.weight[static_cast<size_t>(o) * in + c] = w;
    }
    folded.bias[o] = static_cast<float>(bias);
    if (!std::isfinite(folded.bias[o])) return NonFiniteFold("bias", o, -1, bias);
  }
  return folded;
}

// A table's tensors in the file, checked but not yet read: embeddings.<t>.weight, and for
// int8 embeddings.<t>.qparams F32 [rows, 2], (scale, bias) per row. Null: missing or wrong.
struct TableTensors {
  const TensorView* weight = nullptr;
  const TensorView* qparams = nullptr;
};

TableTensors CheckTable(TensorChecker& checker, const TableSpec& ts, DType dtype) {
  TableTensors out;
  if (ts.remote()) return out;
  out.weight = checker.Get(absl::StrCat("embeddings.", ts.name, ".weight"),
                           std::string(SafetensorsDType(dtype)), {ts.rows, ts.dim});
  if (dtype == DType::kInt8) {
    out.qparams =
        checker.Get(absl::StrCat("embeddings.", ts.name, ".qparams"), "F32", {ts.rows, 2});
  }
  return out;
}

bool Aligned(const TensorView& t, size_t align) {
  return reinterpret_cast<uintptr_t>(t.data) % align == 0;
}

// The bytes of `t` in place, or a copy in `owned` when `copy` or when they are not aligned
// to `align` (a misaligned file costs a copy, not a crash; the memory estimate counts it:
// MisalignedTableBytes, CopiedTableBytes).
const std::byte* Attach(const TensorView& t, size_t align, bool copy,
                        std::vector<std::vector<std::byte>>* owned) {
  if (!copy && Aligned(t, align)) return t.data;
  owned->emplace_back(t.data, t.data + t.nbytes);
  return owned->back().data();
}

// Bytes of the table tensors in `tensors` that Attach will copy (copy = false): what
// MisalignedTableBytes says of the header, measured on the bytes themselves.
uint64_t CopiedTableBytes(const ModelSpec& spec, const TensorMap& tensors) {
  uint64_t bytes = 0;
  auto count = [&](const std::string& name, size_t align) {
    auto it = tensors.find(name);
    if (it != tensors.end() && !Aligned(it->second, align)) bytes += it->second.nbytes;
  };
  for (const TableSpec& ts : spec.tables) {
    if (ts.remote()) continue;
    count(absl::StrCat("embeddings.", ts.name, ".weight"), DTypeBytes(spec.embedding_dtype));
    if (spec.embedding_dtype == DType::kInt8) {
      count(absl::StrCat("embeddings.", ts.name, ".qparams"), alignof(float));
    }
  }
  return bytes;
}

// Points each table at its checked tensors (copying where Attach must) and scans them for
// values that are not finite. REQUIRES: every tensor passed the checks (nothing is copied
// for a file that is refused anyway).
absl::Status AttachTables(const std::vector<TableTensors>& views, bool copy,
                          std::vector<EmbeddingTable>* tables,
                          std::vector<std::vector<std::byte>>* owned) {
  ErrorList problems;
  for (size_t i = 0; i < views.size(); ++i) {
    EmbeddingTable& table = (*tables)[i];
    if (views[i].weight == nullptr) continue;  // a storage: redis table
    table.data = Attach(*views[i].weight, DTypeBytes(table.dtype), copy, owned);
    if (views[i].qparams != nullptr) {
      table.qparams =
          reinterpret_cast<const float*>(Attach(*views[i].qparams, alignof(float), copy, owned));
    }
    if (std::string problem = NonFiniteTableProblem(table); !problem.empty()) {
      problems.AddLine(problem);
    }
  }
  return problems.ToStatus("; ");
}

EmbeddingTable TableOf(const ModelSpec& spec, size_t i) {
  const TableSpec& ts = spec.tables[i];
  return EmbeddingTable{.name = ts.name,
                        .spec_index = static_cast<int>(i),
                        .side = ts.side,
                        .pooling = ts.pooling,
                        .oov = ts.oov,
                        .dtype = spec.embedding_dtype,
                        .rows = ts.rows,
                        .dim = ts.dim,
                        .row_bytes = static_cast<size_t>(DTypeBytes(spec.embedding_dtype)) * ts.dim,
                        .remote = ts.remote()};
}

}  // namespace

Model::~Model() = default;

int Model::FindTable(std::string_view name) const {
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (tables_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<std::shared_ptr<const Model>> Model::Load(const std::string& spec_path,
                                                         const ModelLoadOptions& options) {
  ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpecFile(spec_path));
  return Load(spec, options);
}

absl::StatusOr<WeightsFileBytes> Model::CheckWeightsFile(const ModelSpec& spec) {
  ASSIGN_OR_RETURN(OpenedWeights weights, OpenWeights(spec));
  return WeightsFileBytes{weights.file.size(), MisalignedWeightsBytes(weights, spec)};
}

absl::StatusOr<std::shared_ptr<const Model>> Model::Load(const ModelSpec& spec,
                                                         const ModelLoadOptions& options) {
  RETURN_IF_ERROR(ValidateModelSpec(spec));
  const std::string& path = spec.weights_path;
  ASSIGN_OR_RETURN(OpenedWeights weights, OpenWeights(spec));
  const RegularFile& file = weights.file;
  const uint64_t header_len = weights.header_len;
  RETURN_IF_ERROR(WithContext(CheckModelMemory(spec, file.size(), options.max_bytes), path));
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> copy, MappedFile::CopyOf(file, 8 + header_len));
  absl::StatusOr<TensorMap> tensors =
      ParseSafetensors(copy->data(), copy->size(), nullptr, MaxWeightsTensors(spec));
  if (!tensors.ok()) return WithContext(tensors.status(), path);
  // The tables copied again for their alignment, checked before any is copied.
  RETURN_IF_ERROR(WithContext(
      CheckModelMemory(spec, file.size(), options.max_bytes, CopiedTableBytes(spec, *tensors)),
      path));
  absl::StatusOr<std::shared_ptr<const Model>> model =
      Build(spec, *tensors, std::move(copy), /*copy_tables=*/false);
  if (!model.ok()) return WithContext(model.status(), path);
  return model;
}

absl::StatusOr<std::shared_ptr<const Model>> Model::FromTensors(const ModelSpec& spec,
                                                                const TensorMap& tensors,
                                                                const ModelLoadOptions& options) {
  RETURN_IF_ERROR(ValidateModelSpec(spec));
  RETURN_IF_ERROR(CheckModelMemory(spec, 0, options.max_bytes));
  return Build(spec, tensors, nullptr, /*copy_tables=*/true);
}

absl::StatusOr<std::shared_ptr<const Model>> Model::Build(const ModelSpec& spec,
                                                          const TensorMap& tensors,
                                                          std::unique_ptr<MappedFile> file,
                                                          bool copy_tables) {
  RETURN_IF_ERROR(ValidateModelSpec(spec));
  std::shared_ptr<Model> model(new Model());
  model->spec_ = spec;
  TensorChecker checker(tensors);

  // Every tensor is checked before any table is copied: a file refused for a missing or
  // extra tensor costs no copy beyond its budgeted one.
  std::vector<TableTensors> views;
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    views.push_back(CheckTable(checker, spec.tables[i], spec.embedding_dtype));
    (spec.tables[i].side == Side::kUser ? model->user_tables_ : model->item_tables_).push_back(i);
    model->tables_.push_back(TableOf(spec, i));
  }
  int in = spec.dense_total();
  for (size_t i = 0; i < spec.bottom_mlp.size(); ++i) {
    model->bottom_mlp_.push_back(
        checker.Layer(absl::StrCat("bottom_mlp.", i), in, spec.bottom_mlp[i], /*relu=*/true));
    in = spec.bottom_mlp[i];
  }
  DenseLayer cross;
  in = spec.interaction_width();
  if (spec.interaction == Interaction::kLinear) {
    cross = checker.Layer("cross", spec.concat_width(), spec.cross_dim, /*relu=*/false);
    in = spec.cross_dim;
  }
  for (int l = 0; l < spec.dcn.layers; ++l) {
    model->dcn_.push_back(checker.Cross(l, spec.concat_width(), spec.dcn.low_rank));
  }
  for (size_t i = 0; i < spec.top_mlp.size(); ++i) {
    const bool relu = i + 1 < spec.top_mlp.size();
    model->top_mlp_.push_back(
        checker.Layer(absl::StrCat("top_mlp.", i), in, spec.top_mlp[i], relu));
    in = spec.top_mlp[i];
  }
  checker.CheckNoExtras();
  RETURN_IF_ERROR(checker.ToStatus());
  RETURN_IF_ERROR(AttachTables(views, copy_tables, &model->tables_, &model->owned_));
  if (spec.interaction == Interaction::kLinear) {
    ASSIGN_OR_RETURN(model->top_mlp_[0], FoldCross(cross, model->top_mlp_[0]));
  }
  model->file_ = std::move(file);
  return std::shared_ptr<const Model>(std::move(model));
}

}  // namespace fuserank::engine
