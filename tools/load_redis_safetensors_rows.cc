#include "tools/load_redis_safetensors_rows.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/mapped_file.h"
#include "engine/safetensors.h"
#include "engine/status_macros.h"

namespace fuserank::tools {
namespace {

absl::Status ReadKeys(const std::string& path, size_t rows, std::vector<int64_t>* keys) {
  std::ifstream in;
  RETURN_IF_ERROR(OpenInput(path, &in));
  std::vector<std::pair<int64_t, size_t>> lines;  // (key, line), to find a key given twice
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    int64_t key = 0;
    if (!absl::SimpleAtoi(line, &key)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": not an int64"));
    }
    keys->push_back(key);
    lines.emplace_back(key, n);
  }
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": read failed: ", std::strerror(errno)));
  }
  if (keys->size() != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", keys->size(), " keys for ", rows, " rows"));
  }
  // Two rows under one key: the second would overwrite the first in the cluster.
  std::sort(lines.begin(), lines.end());
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].first == lines[i - 1].first) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", lines[i].second, ": key ",
                                                     lines[i].first, " again (first on line ",
                                                     lines[i - 1].second, ")"));
    }
  }
  return absl::OkStatus();
}

// The dtype a storage: redis table of each embedding_dtype holds.
const char* EmbeddingDtypeOf(const std::string& tensor_dtype) {
  if (tensor_dtype == "F32") return "fp32";
  if (tensor_dtype == "F16") return "fp16";
  if (tensor_dtype == "BF16") return "bf16";
  return "int8";
}

// An I8 tensor's (scale, bias) pairs.
absl::StatusOr<const char*> Qparams(const SafetensorsRowsOptions& options,
                                    const engine::TensorMap& tensors, const engine::TensorView& t) {
  std::string name = options.qparams;
  if (name.empty()) {
    name = options.tensor;
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
      name.resize(name.size() - 7);
    }
    name += ".qparams";
  }
  const auto q = tensors.find(name);
  if (q == tensors.end()) {
    return absl::InvalidArgumentError(absl::StrCat(options.path, ": ", options.tensor,
                                                   " is I8 but there is no tensor '", name,
                                                   "' of its (scale, bias) pairs (--qparams)"));
  }
  if (q->second.dtype != "F32" || q->second.shape.size() != 2 || q->second.shape[0] != t.shape[0] ||
      q->second.shape[1] != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": want an F32 [", t.shape[0], ", 2] tensor"));
  }
  return reinterpret_cast<const char*>(q->second.data);
}

// The rows of a tensor of a mapped safetensors file (I8: each row's codes followed by its
// (scale, bias) from the qparams tensor).
class SafetensorsRows : public RowSource {
 public:
  static absl::StatusOr<std::unique_ptr<RowSource>> Open(const SafetensorsRowsOptions& options);

  size_t rows() const override { return rows_; }
  absl::Status Next(size_t max, RowBatch* batch) override {
    batch->Clear();
    for (; batch->keys.size() < max && next_ < rows_; ++next_) {
      batch->keys.push_back(keys_.empty() ? static_cast<int64_t>(next_) : keys_[next_]);
      batch->bytes.append(data_ + next_ * row_bytes_, row_bytes_);
      if (qparams_ != nullptr) batch->bytes.append(qparams_ + next_ * 8, 8);
      batch->ends.push_back(batch->bytes.size());
    }
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<engine::MappedFile> file_;
  const char* data_ = nullptr;
  const char* qparams_ = nullptr;
  size_t rows_ = 0;
  size_t row_bytes_ = 0;
  std::vector<int64_t> keys_;  // empty: the row index
  size_t next_ = 0;
};

absl::StatusOr<std::unique_ptr<RowSource>> SafetensorsRows::Open(
    const SafetensorsRowsOptions& options) {
  auto rows = std::make_unique<SafetensorsRows>();
  ASSIGN_OR_RETURN(rows->file_, engine::MappedFile::Open(options.path));
  absl::StatusOr<engine::TensorMap> tensors =
      engine::ParseSafetensors(rows->file_->data(), rows->file_->size());
  if (!tensors.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(options.path, ": ", tensors.status().message()));
  }
  const auto it = tensors->find(options.tensor);
  if (it == tensors->end()) {
    return absl::NotFoundError(absl::StrCat(options.path, ": no tensor '", options.tensor, "'"));
  }
  const engine::TensorView& t = it->second;
  if (t.shape.size() != 2 ||
      (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16" && t.dtype != "I8")) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.tensor, ": want a [rows, dim] F32, F16, BF16 or I8 tensor"));
  }
  // A table stored in another dtype than the model's embedding_dtype would be read as
  // garbage by the server.
  if (!options.dtype.empty() && options.dtype != EmbeddingDtypeOf(t.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype=", options.dtype, ": ", options.tensor, " is ", t.dtype, ", which ",
                     "only a model with embedding_dtype ", EmbeddingDtypeOf(t.dtype), " reads"));
  }
  rows->rows_ = static_cast<size_t>(t.shape[0]);
  rows->row_bytes_ = rows->rows_ == 0 ? 0 : t.nbytes / rows->rows_;
  rows->data_ = reinterpret_cast<const char*>(t.data);
  if (t.dtype == "I8") {
    ASSIGN_OR_RETURN(rows->qparams_, Qparams(options, *tensors, t));
  }
  if (!options.keys.empty()) RETURN_IF_ERROR(ReadKeys(options.keys, rows->rows_, &rows->keys_));
  return rows;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RowSource>> OpenSafetensorsRows(
    const SafetensorsRowsOptions& options) {
  return SafetensorsRows::Open(options);
}

}  // namespace fuserank::tools
