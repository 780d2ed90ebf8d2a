// A loaded model: its spec, embedding tables (pointing into a private, read-only copy of
// the weights file: engine/mapped_file.h) and the dense MLP layers with the linear cross
// already folded in. Loading checks the spec's implied sizes and a memory limit before it
// reads or allocates anything, and refuses non-finite values in every tensor.
// Immutable after construction; share it read-only as std::shared_ptr<const Model>.
#ifndef FUSERANK_ENGINE_MODEL_H_
#define FUSERANK_ENGINE_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model_spec.h"

namespace fuserank::engine {

class MappedFile;

// One embedding table's rows: `rows` x `dim` elements of `dtype`, row-major.
struct EmbeddingTable {
  std::string name;
  int spec_index = 0;  // position in ModelSpec::tables
  Side side = Side::kItem;
  Pooling pooling = Pooling::kSum;
  Oov oov = Oov::kModulo;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int dim = 0;
  const std::byte* data = nullptr;  // points into the mapped file or owned storage
  size_t row_bytes = 0;             // bytes of one row in `data`
  // kInt8 only: per row (scale, bias), value = scale * q + bias (docs/model-format.md).
  const float* qparams = nullptr;
  // storage: redis: no rows here (data null, rows 0); a batch's rows are fetched into a
  // staged copy first (engine/remote_tier.h).
  bool remote = false;
};

// A fully connected layer, PyTorch layout: weight [out, in] row-major, bias [out].
struct DenseLayer {
  int in = 0;
  int out = 0;
  bool relu = true;
  std::vector<float> weight;
  std::vector<float> bias;
};

// One DCNv2 cross layer (interaction: dcn): x_{l+1} = x0 * (up(down(x_l))) + x_l. Low rank:
// down = V_l [R, d0] with a zero bias, up = U_l [d0, R] with b_l. Full rank: down is empty
// (out == 0) and up = W_l [d0, d0] with b_l. Neither has a ReLU.
struct CrossLayer {
  DenseLayer down;
  DenseLayer up;
};

// A named tensor in memory (safetensors dtype strings: "F32", "F16", "BF16", "I8", ...).
struct TensorView {
  std::string dtype;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t nbytes = 0;
};
using TensorMap = std::map<std::string, TensorView>;

// SPEC section 2, step 1: the row of `id` in a table of `rows` rows. Returns false
// when the id is out of range and the table's policy is Oov::kReject.
inline bool MapRow(int64_t id, int64_t rows, Oov oov, int32_t* row) {
  if (id >= 0 && id < rows) {
    *row = static_cast<int32_t>(id);
    return true;
  }
  if (oov == Oov::kReject) return false;
  *row = static_cast<int32_t>(((id % rows) + rows) % rows);
  return true;
}

struct ModelLoadOptions {
  // The most bytes loading may allocate for the model (ModelMemory::model() of
  // engine/model_memory.h: the weights copy, the dense layers, the linear cross's fold, the
  // dcn layers, the copies of misaligned tables), checked from the spec and the file's size
  // before anything is read, and with the copies once the header is read, before any table
  // is copied; 0: no limit. Over it: RESOURCE_EXHAUSTED naming both numbers.
  uint64_t max_bytes = 0;
};

// What Model::Load will hold of a weights file (the inputs of EstimateModelMemory).
struct WeightsFileBytes {
  uint64_t file = 0;  // the file's size: Load's private copy of it
  // Table tensors at offsets not aligned to their element size, which Load copies again
  // (MisalignedTableBytes); 0 when the header cannot be read or parsed (Load refuses such
  // a file before it copies any table).
  uint64_t copied = 0;
};

class Model {
 public:
  // Loads `spec_path` and the safetensors file it names into a private copy. The weights
  // must be a regular file no larger than its header and the spec's tensors take (else
  // INVALID_ARGUMENT, before it is read) and hold exactly those tensors, all finite (a NaN
  // or Inf in a table is refused naming the table and the row).
  static absl::StatusOr<std::shared_ptr<const Model>> Load(const std::string& spec_path,
                                                           const ModelLoadOptions& options = {});
  // The same for a spec already parsed (its weights_path resolved).
  static absl::StatusOr<std::shared_ptr<const Model>> Load(const ModelSpec& spec,
                                                           const ModelLoadOptions& options);
  // The size of `spec`'s weights file when it passes the checks Load makes before it reads
  // anything: a regular file, a header length within the format's limit, no more bytes than
  // the header and the spec's tensors take (INVALID_ARGUMENT, or RegularFile::Open's errors);
  // and, from its header, the bytes of tables Load would copy again.
  static absl::StatusOr<WeightsFileBytes> CheckWeightsFile(const ModelSpec& spec);
  // Builds a model from tensors in memory (tests, generators, fuzzing); tensors are copied.
  static absl::StatusOr<std::shared_ptr<const Model>> FromTensors(
      const ModelSpec& spec, const TensorMap& tensors, const ModelLoadOptions& options = {});

  const ModelSpec& spec() const { return spec_; }
  const std::vector<EmbeddingTable>& tables() const { return tables_; }
  // Spec indices of the user-side and item-side tables, in spec order.
  const std::vector<int>& user_tables() const { return user_tables_; }
  const std::vector<int>& item_tables() const { return item_tables_; }
  const std::vector<DenseLayer>& bottom_mlp() const { return bottom_mlp_; }
  // With `interaction: linear`, layer 0 is W_top1 * W_cross (input: concat(V)).
  const std::vector<DenseLayer>& top_mlp() const { return top_mlp_; }
  // With `interaction: dcn`, the cross layers in order (empty otherwise).
  const std::vector<CrossLayer>& dcn() const { return dcn_; }
  // Position of a table by name, or -1.
  int FindTable(std::string_view name) const;

  ~Model();

 private:
  Model() = default;
  static absl::StatusOr<std::shared_ptr<const Model>> Build(const ModelSpec& spec,
                                                            const TensorMap& tensors,
                                                            std::unique_ptr<MappedFile> file,
                                                            bool copy_tables);

  ModelSpec spec_;
  std::vector<EmbeddingTable> tables_;
  std::vector<int> user_tables_;
  std::vector<int> item_tables_;
  std::vector<DenseLayer> bottom_mlp_;
  std::vector<DenseLayer> top_mlp_;
  std::vector<CrossLayer> dcn_;
  std::unique_ptr<MappedFile> file_;           // the private copy the tables point into
  std::vector<std::vector<std::byte>> owned_;  // tables copied (FromTensors, misaligned ones)
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_MODEL_H_
