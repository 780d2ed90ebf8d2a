#include "engine/model_memory.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cpu/sgemm.h"
#include "engine/hot_rows/frequency_sketch.h"
#include "engine/near_cache.h"
#include "engine/safetensors.h"

namespace fuserank::engine {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kTileCandidates = 64;    // engine/cpu/cpu_forward.h
constexpr uint64_t kReservedRequests = 64;  // engine/cpu/cpu_backend.cc

uint64_t Add(uint64_t a, uint64_t b) { return a > kMax - b ? kMax : a + b; }
uint64_t Mul(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? kMax : out;
}
uint64_t U(int64_t v) { return v < 0 ? 0 : static_cast<uint64_t>(v); }

// A float32 nn.Linear [out, in] with its bias.
uint64_t LayerBytes(uint64_t in, uint64_t out) { return Mul(Add(Mul(in, out), out), 4); }

// The same packed for SgemmPacked: columns padded to whole panels.
uint64_t PackedBytes(uint64_t in, uint64_t out) {
  const uint64_t padded = Mul((out + kSgemmPanel - 1) / kSgemmPanel, kSgemmPanel);
  return Mul(Add(Mul(in, padded), out), 4);
}

// Widths of the layers in serving order, with the input width of each.
struct Layer {
  uint64_t in;
  uint64_t out;
};

std::vector<Layer> ServedLayers(const ModelSpec& spec) {
  std::vector<Layer> layers;
  uint64_t in = U(spec.dense_total());
  for (int width : spec.bottom_mlp) {
    layers.push_back({in, U(width)});
    in = U(width);
  }
  const uint64_t d0 = U(spec.concat_width());
  const uint64_t rank = U(spec.dcn.low_rank);
  for (int l = 0; l < spec.dcn.layers; ++l) {  // dcn: V_l and U_l, or W_l
    if (rank > 0) {
      layers.push_back({d0, rank});
      layers.push_back({rank, d0});
    } else {
      layers.push_back({d0, d0});
    }
  }
  in = U(spec.interaction_width());
  for (int width : spec.top_mlp) {
    layers.push_back({in, U(width)});
    in = U(width);
  }
  return layers;
}

}  // namespace

std::vector<SpecTensor> SpecTensors(const ModelSpec& spec) {
  std::vector<SpecTensor> tensors;
  const std::string table_dtype(SafetensorsDType(spec.embedding_dtype));
  for (const TableSpec& t : spec.tables) {
    if (t.remote()) continue;  // its rows live in the cluster, not in the weights file
    const std::string prefix = absl::StrCat("embeddings.", t.name);
    tensors.push_back({prefix + ".weight", table_dtype, {t.rows, t.dim}});
    if (spec.embedding_dtype == DType::kInt8)
      tensors.push_back({prefix + ".qparams", "F32", {t.rows, 2}});
  }
  auto layers = [&](const std::string& prefix, int64_t in, const std::vector<int>& widths) {
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string name = absl::StrCat(prefix, ".", i);
      tensors.push_back({name + ".weight", "F32", {widths[i], in}});
      tensors.push_back({name + ".bias", "F32", {widths[i]}});
      in = widths[i];
    }
  };
  layers("bottom_mlp", spec.dense_total(), spec.bottom_mlp);
  int64_t in = spec.interaction_width();
  if (spec.interaction == Interaction::kLinear) {
    tensors.push_back({"cross.weight", "F32", {spec.cross_dim, spec.concat_width()}});
    tensors.push_back({"cross.bias", "F32", {spec.cross_dim}});
    in = spec.cross_dim;
  }
  const int64_t d0 = spec.concat_width(), rank = spec.dcn.low_rank;
  for (int l = 0; l < spec.dcn.layers; ++l) {
    const std::string name = absl::StrCat("dcn.", l);
    if (rank > 0) {
      tensors.push_back({name + ".V.weight", "F32", {rank, d0}});
      tensors.push_back({name + ".U.weight", "F32", {d0, rank}});
    } else {
      tensors.push_back({name + ".W.weight", "F32", {d0, d0}});
    }
    tensors.push_back({name + ".bias", "F32", {d0}});
  }
  layers("top_mlp", in, spec.top_mlp);
  return tensors;
}

uint64_t SpecTensorBytes(const ModelSpec& spec) {
  uint64_t bytes = 0;
  for (const SpecTensor& t : SpecTensors(spec)) {
    uint64_t n = SafetensorsDTypeSize(t.dtype);
    for (int64_t d : t.shape) n = Mul(n, U(d));
    bytes = Add(bytes, n);
  }
  return bytes;
}

uint64_t ModelMemory::model() const { return Add(Add(weights, dense), copies); }

uint64_t ModelMemory::total() const {
  return Add(Add(Add(Add(Add(model(), plan), scratch), hot_rows), near_cache), pinned_tables);
}

std::string ModelMemory::Breakdown() const {
  return absl::StrCat(
      "weights ", FormatBytes(weights), ", dense layers ", FormatBytes(dense), ", CPU plan ",
      FormatBytes(plan), ", scratch ", FormatBytes(scratch), ", hot rows ", FormatBytes(hot_rows),
      near_cache > 0 ? absl::StrCat(", near cache ", FormatBytes(near_cache)) : "",
      pinned_tables > 0 ? absl::StrCat(", pinned tables ", FormatBytes(pinned_tables)) : "",
      copies > 0 ? absl::StrCat(", misaligned tables copied ", FormatBytes(copies)) : "");
}

uint64_t HotSetBytes(uint64_t rows, uint64_t row_bytes, bool int8) {
  if (rows == 0) return 0;
  // The index: two int32 arrays of the smallest power of two >= 2 * rows entries.
  uint64_t slots = 2;
  while (slots < rows * 2 && slots < (uint64_t{1} << 62)) slots *= 2;
  const uint64_t per_row = Add(Add(row_bytes, 4), int8 ? 8 : 0);
  return Add(Mul(rows, per_row), Mul(slots, 8));
}

uint64_t RemoteHotSetBytes(uint64_t rows, uint64_t value_bytes) {
  if (rows == 0) return 0;
  // The values, the slot -> id list and the id -> slot index (16-byte slots and a control
  // byte each, 2^k - 1 of them with room for the ids at the index's 7/8 load).
  const uint64_t wanted = Add(Add(rows, rows / 7), 1);
  uint64_t slots = 2;
  while (slots < wanted && slots < (uint64_t{1} << 62)) slots *= 2;
  return Add(Mul(rows, Add(value_bytes, 8)), Add(Mul(slots, 17), 64));
}

uint64_t NearCacheBytes(uint64_t rows, uint64_t row_bytes) {
  if (rows == 0) return 0;
  // As NearCache's constructor sizes its shards.
  const uint64_t shards = std::min<uint64_t>(NearCache::kMaxShards, rows);
  const uint64_t per_shard = rows / shards + (rows % shards != 0 ? 1 : 0);
  // A key index at most half full: the power of two >= 2 x per_shard buckets.
  const uint64_t buckets =
      per_shard >= (uint64_t{1} << 61) ? (uint64_t{1} << 62) : NearCache::IndexBuckets(per_shard);
  uint64_t shard = Mul(per_shard, Add(row_bytes, NearCache::kEntryBytes));
  shard = Add(shard, Mul(buckets, NearCache::kIndexSlotBytes));
  shard = Add(shard, NearCache::kShardOverheadBytes);
  return Add(Mul(shards, shard), Mul(shards, sizeof(void*)));
}

namespace {

// The near cache of every storage: redis table.
uint64_t NearCacheTotal(const ModelSpec& spec, const ServingShape& shape) {
  if (shape.near_cache_rows <= 0) return 0;
  const uint64_t element = SafetensorsDTypeSize(SafetensorsDType(spec.embedding_dtype));
  uint64_t bytes = 0;
  for (const TableSpec& t : spec.tables) {
    if (!t.remote()) continue;
    // A value as the cluster holds it: the row, and an int8 row's (scale, bias).
    const uint64_t value =
        Add(Mul(U(t.dim), element), spec.embedding_dtype == DType::kInt8 ? 8 : 0);
    bytes = Add(bytes, NearCacheBytes(U(shape.near_cache_rows), value));
  }
  return bytes;
}

// The hot-row cache of a version: two full sets per table (the serving one and the one a
// Set or Rebuild builds beside it), and each table's sketch for the frequency policy.
uint64_t HotRowBytes(const ModelSpec& spec, const ServingShape& shape) {
  if (shape.hot_rows_per_table <= 0) return 0;
  const uint64_t element = SafetensorsDTypeSize(SafetensorsDType(spec.embedding_dtype));
  const bool int8 = spec.embedding_dtype == DType::kInt8;
  const uint64_t sketch = shape.frequency_sketches
                              ? FrequencySketch::EstimateMemoryBytes(
                                    FrequencySketch::OptionsForCapacity(shape.hot_rows_per_table))
                              : 0;
  const uint64_t id_sketch =
      shape.frequency_sketches ? IdFrequencySketch::EstimateMemoryBytes(
                                     FrequencySketch::OptionsForCapacity(shape.hot_rows_per_table))
                               : 0;
  uint64_t bytes = 0;
  for (const TableSpec& t : spec.tables) {
    if (t.remote()) {  // hot ids' values fetched from the cluster, a sketch keyed by id
      const uint64_t value = Add(Mul(U(t.dim), element), int8 ? 8 : 0);
      bytes =
          Add(bytes, Add(Mul(RemoteHotSetBytes(U(shape.hot_rows_per_table), value), 2), id_sketch));
      continue;
    }
    const uint64_t rows = std::min(U(t.rows), U(shape.hot_rows_per_table));
    bytes = Add(bytes, Add(Mul(HotSetBytes(rows, Mul(U(t.dim), element), int8), 2), sketch));
  }
  return bytes;
}

// cache.placement: host: every local table's rows as the CUDA backend's device row layout
// holds them, in page-locked host memory.
uint64_t PinnedTableBytes(const ModelSpec& spec) {
  const uint64_t element = SafetensorsDTypeSize(SafetensorsDType(spec.embedding_dtype));
  uint64_t bytes = 0;
  for (const TableSpec& t : spec.tables) {
    if (t.remote()) continue;
    uint64_t row = Mul(U(t.dim), element);
    if (spec.embedding_dtype == DType::kInt8) row = ((U(t.dim) + 7) / 8 * 8 + 8 + 15) / 16 * 16;
    bytes = Add(bytes, Mul(U(t.rows), row));
  }
  return bytes;
}

}  // namespace

std::string ModelMemory::ToString() const {
  return absl::StrCat(FormatBytes(total()), " (", Breakdown(), ")");
}

uint64_t MisalignedTableBytes(const ModelSpec& spec,
                              const std::map<std::string, SafetensorsEntry>& header) {
  const uint64_t element = SafetensorsDTypeSize(SafetensorsDType(spec.embedding_dtype));
  uint64_t bytes = 0;
  auto count = [&](const std::string& name, uint64_t align) {
    auto it = header.find(name);
    if (it == header.end() || it->second.begin % align == 0) return;
    bytes = Add(bytes, it->second.end >= it->second.begin ? it->second.end - it->second.begin : 0);
  };
  for (const TableSpec& t : spec.tables) {
    if (t.remote()) continue;
    const std::string prefix = absl::StrCat("embeddings.", t.name);
    count(prefix + ".weight", std::max<uint64_t>(element, 1));
    if (spec.embedding_dtype == DType::kInt8) count(prefix + ".qparams", sizeof(float));
  }
  return bytes;
}

ModelMemory EstimateModelMemory(const ModelSpec& spec, uint64_t file_bytes,
                                const ServingShape& shape, uint64_t copied_bytes) {
  ModelMemory memory;
  const uint64_t tensors = SpecTensorBytes(spec);
  memory.weights = file_bytes > 0 ? file_bytes : tensors;
  memory.copies = copied_bytes;
  const std::vector<Layer> layers = ServedLayers(spec);
  uint64_t widest = 1;
  for (const Layer& layer : layers) {
    memory.dense = Add(memory.dense, LayerBytes(layer.in, layer.out));
    memory.plan = Add(memory.plan, PackedBytes(layer.in, layer.out));
    widest = std::max(widest, layer.out);
  }
  if (spec.interaction == Interaction::kLinear && !spec.top_mlp.empty()) {
    // While folding: the cross, the unfolded top layer and a row of doubles beside the fold.
    const uint64_t concat = U(spec.concat_width());
    memory.dense = Add(memory.dense, LayerBytes(concat, U(spec.cross_dim)));
    memory.dense = Add(memory.dense, LayerBytes(U(spec.cross_dim), U(spec.top_mlp[0])));
    memory.dense = Add(memory.dense, Mul(concat, 8));
  }
  // One thread's tile: activation rows, item block, two layer blocks, logits; with dcn
  // two blocks of x_l and one of V_l x_l.
  const uint64_t row = Add(U(spec.interaction_width()), 8);
  uint64_t per_candidate = Add(Add(row, U(spec.concat_width())), Add(Mul(widest, 2), 1));
  if (spec.interaction == Interaction::kDcn) {
    per_candidate = Add(per_candidate, Add(Mul(U(spec.concat_width()), 2), U(spec.dcn.low_rank)));
  }
  const uint64_t tile = Mul(Mul(kTileCandidates, per_candidate), 4);
  const uint64_t threads =
      Mul(U(std::max(shape.workers, 1)), U(std::max(shape.threads_per_worker, 1)));
  const uint64_t candidates = U(std::max(shape.max_batch_candidates, 1));
  // Per worker: request shares, scores and tiles of a full batch.
  const uint64_t share = Add(Add(U(spec.concat_width()), U(spec.interaction_width())), widest);
  const uint64_t worker = Add(Mul(Mul(kReservedRequests, share), 4), Mul(candidates, 16));
  // The warm-up's synthetic full batch: one id per item bag, item dense features.
  uint64_t item_tables = 0;
  for (const TableSpec& t : spec.tables) item_tables += t.side == Side::kItem ? 1 : 0;
  const uint64_t batch = Mul(candidates, Add(Mul(item_tables, 12), Mul(U(spec.dense_item), 4)));
  memory.scratch = Add(Add(Mul(threads, tile), Mul(U(std::max(shape.workers, 1)), worker)), batch);
  memory.hot_rows = HotRowBytes(spec, shape);
  memory.near_cache = NearCacheTotal(spec, shape);
  if (shape.host_tables) memory.pinned_tables = PinnedTableBytes(spec);
  return memory;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes == kMax) return "more than 16 EiB";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

}  // namespace fuserank::engine
