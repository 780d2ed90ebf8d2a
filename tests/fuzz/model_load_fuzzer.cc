// libFuzzer target: model loading from any bytes, a spec and a safetensors file together:
// ParseModelSpec -> ParseSafetensors -> Model::FromTensors (with a memory limit) -> the CPU
// backend -> one forward of a small batch built from the input. It must never crash, throw
// (std::bad_alloc from a spec that asks for terabytes), or read outside the input; every
// refusal is a clean INVALID_ARGUMENT / RESOURCE_EXHAUSTED whose message is printable
// UTF-8 (no raw file bytes); an accepted model scores every candidate finite in [0, 1],
// whatever the weights, bag weights and dense values.
//
// Input: a 2-byte little-endian spec length N, N bytes of spec YAML, then the safetensors
// file; when that starts with '{' it is a bare JSON header followed by the data, and the
// 8-byte header length is prepended here (as fuzz_safetensors does). The last 64 bytes of
// the input (when there are that many) also seed the batch: ids, bag weights, dense values.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend.h"
#include "engine/batch.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/escape_text.h"
#include "engine/model.h"
#include "engine/model_memory.h"
#include "engine/model_spec.h"
#include "engine/safetensors.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_verdict.h"

namespace {

using namespace fuserank::engine;

constexpr uint64_t kMemoryLimit = uint64_t{64} << 20;  // model + plan + scratch
constexpr int kCandidates = 3;

// Deterministic values from the input's tail: small and extreme floats alike.
class Entropy {
 public:
  Entropy(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint32_t Next() {
    uint32_t v = 2166136261u;
    for (int i = 0; i < 4; ++i) v = (v ^ (size_ == 0 ? 0 : data_[pos_++ % size_])) * 16777619u;
    return v;
  }
  float Value() {
    static constexpr float kValues[] = {0.0f, 1.0f, -1.0f, 0.5f, 3e38f, -3e38f, 1e-38f, 7.0f};
    const uint32_t v = Next();
    return v % 4 == 0 ? kValues[(v >> 2) % 8] : static_cast<float>(static_cast<int16_t>(v)) / 256;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

void AddBag(const EmbeddingTable& table, Entropy& entropy, BagSet* bags) {
  const int ids = static_cast<int>(entropy.Next() % 4);
  for (int i = 0; i < ids; ++i) {
    int32_t row = 0;
    const int64_t id = static_cast<int64_t>(entropy.Next()) - (int64_t{1} << 31);
    if (!MapRow(id, table.rows, Oov::kModulo, &row)) row = 0;
    bags->rows.push_back(row);
    bags->weights.push_back(entropy.Value());
  }
  bags->bag_begin.push_back(static_cast<uint32_t>(bags->rows.size()));
}

Batch MakeBatch(const std::shared_ptr<const Model>& model, Entropy& entropy) {
  Batch batch;
  batch.model = model;
  batch.candidate_begin = {0, kCandidates};
  batch.top_k = {kCandidates};
  for (int t : model->user_tables()) AddBag(model->tables()[t], entropy, &batch.user);
  for (int c = 0; c < kCandidates; ++c) {
    for (int t : model->item_tables()) AddBag(model->tables()[t], entropy, &batch.item);
  }
  for (int i = 0; i < model->spec().dense_user; ++i) batch.user_dense.push_back(entropy.Value());
  for (int i = 0; i < kCandidates * model->spec().dense_item; ++i) {
    batch.item_dense.push_back(entropy.Value());
  }
  return batch;
}

void CheckRefusal(const absl::Status& status, absl::StatusCode also) {
  fuserank::fuzz::FuzzVerdict(false, status.message());
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument || status.code() == also,
             status.ToString());
  FUZZ_CHECK(!status.message().empty(), "an error without a message");
  FUZZ_CHECK(IsPrintableUtf8(status.message()),
             absl::StrCat("raw bytes in a message: ", EscapeText(status.message(), 1024)));
}

void LoadAndScore(absl::string_view spec_text, const uint8_t* file, size_t file_size,
                  Entropy& entropy) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(std::string(spec_text), "/fuzz");
  if (!spec.ok()) return CheckRefusal(spec.status(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<TensorMap> tensors =
      ParseSafetensors(reinterpret_cast<const std::byte*>(file), file_size);
  if (!tensors.ok()) return CheckRefusal(tensors.status(), absl::StatusCode::kInvalidArgument);
  BackendOptions options;
  options.workers = 1;
  options.max_batch_candidates = 64;
  const ModelMemory memory =
      EstimateModelMemory(*spec, 0,
                          ServingShape{1, 1, options.max_batch_candidates, /*hot_rows_per_table=*/0,
                                       /*frequency_sketches=*/false});  // no hot-row cache here
  if (memory.total() > kMemoryLimit) {  // what the server's budget refuses before loading
    return CheckRefusal(absl::ResourceExhaustedError(memory.ToString()),
                        absl::StatusCode::kResourceExhausted);
  }
  ModelLoadOptions load;
  load.max_bytes = kMemoryLimit;
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::FromTensors(*spec, *tensors, load);
  if (!model.ok()) return CheckRefusal(model.status(), absl::StatusCode::kResourceExhausted);
  fuserank::fuzz::FuzzVerdict(true);
  std::unique_ptr<Backend> backend = CreateCpuBackend(*model, options);
  const Batch batch = MakeBatch(*model, entropy);
  BatchResult result;
  const absl::Status run = backend->Run(0, batch, &result);
  FUZZ_CHECK(run.ok(), absl::StrCat("a valid batch failed: ", run.ToString()));
  FUZZ_CHECK(result.items.size() == kCandidates, absl::StrCat(result.items.size(), " items"));
  for (const ScoredIndex& item : result.items) {
    FUZZ_CHECK(std::isfinite(item.score) && item.score >= 0.0f && item.score <= 1.0f,
               absl::StrCat("candidate ", item.index, " scored ", item.score));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t spec_size = std::min<size_t>(data[0] | (size_t{data[1]} << 8), size - 2);
  const absl::string_view spec(reinterpret_cast<const char*>(data + 2), spec_size);
  const uint8_t* rest = data + 2 + spec_size;
  const size_t rest_size = size - 2 - spec_size;
  Entropy entropy(size >= 64 ? data + size - 64 : data, std::min<size_t>(size, 64));
  if (rest_size == 0 || rest[0] != '{') {
    std::vector<uint8_t> file(rest, rest + rest_size);  // exact size: ASan sees overreads
    LoadAndScore(spec, file.data(), file.size(), entropy);
    return 0;
  }
  size_t header = rest_size;
  while (header > 0 && rest[header - 1] != '}') --header;
  std::vector<uint8_t> file(8 + rest_size);
  for (int i = 0; i < 8; ++i)
    file[i] = static_cast<uint8_t>(static_cast<uint64_t>(header) >> (8 * i));
  std::memcpy(file.data() + 8, rest, rest_size);
  LoadAndScore(spec, file.data(), file.size(), entropy);
  return 0;
}
