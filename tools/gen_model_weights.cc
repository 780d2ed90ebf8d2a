#include "tools/gen_model_weights.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/cpu/cpu_dtype.h"
#include "engine/status_macros.h"

namespace fuserank::tools {
namespace {

using engine::SafetensorsWriter;

// SplitMix64: tiny, fast, and identical on every platform (std distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float Uniform() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }  // [0,1)

 private:
  uint64_t state_;
};

uint64_t TensorSeed(uint64_t seed, absl::string_view name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return Rng(seed ^ h).Next();
}

// Streams one tensor's values, generated and encoded a chunk at a time.
absl::Status WriteTensor(const PlannedTensor& p, uint64_t seed, SafetensorsWriter* writer) {
  Rng rng(TensorSeed(seed, p.entry.name));
  uint64_t remaining = 1;
  for (int64_t d : p.entry.shape) remaining *= d;
  constexpr size_t kChunk = 1 << 20;
  std::vector<float> values(kChunk);
  std::vector<uint16_t> halves(p.entry.dtype == "F32" ? 0 : kChunk);
  while (remaining > 0) {
    const size_t n = std::min<uint64_t>(kChunk, remaining);
    for (size_t i = 0; i < n; ++i) {
      values[i] = p.table ? (rng.Uniform() + rng.Uniform() - 1.0f) * 2 * p.bound
                          : (2 * rng.Uniform() - 1.0f) * p.bound;
    }
    if (p.entry.dtype == "F32") {
      RETURN_IF_ERROR(writer->Append(values.data(), n * sizeof(float)));
    } else {
      const bool f16 = p.entry.dtype == "F16";
      for (size_t i = 0; i < n; ++i) {
        halves[i] = f16 ? engine::FloatToHalf(values[i]) : engine::FloatToBFloat16(values[i]);
      }
      RETURN_IF_ERROR(writer->Append(halves.data(), n * sizeof(uint16_t)));
    }
    remaining -= n;
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<PlannedTensor> PlanWeights(const engine::ModelSpec& spec) {
  std::vector<PlannedTensor> plan;  // float32 layers first, then the (maybe 2-byte) tables
  auto layer = [&](const std::string& prefix, int64_t in, int64_t out) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    plan.push_back({{prefix + ".weight", "F32", {out, in}}, bound});
    plan.push_back({{prefix + ".bias", "F32", {out}}, bound});
  };
  int in = spec.dense_total();
  for (size_t i = 0; i < spec.bottom_mlp.size(); ++i) {
    layer(absl::StrCat("bottom_mlp.", i), in, spec.bottom_mlp[i]);
    in = spec.bottom_mlp[i];
  }
  in = spec.interaction_width();
  if (spec.interaction == engine::Interaction::kLinear) {
    layer("cross", spec.concat_width(), spec.cross_dim);
    in = spec.cross_dim;
  }
  // dcn: weights ~ U(+-1/(2 sqrt(fan_in))) so that x_l stays the size of x0 over the layers.
  const int64_t d0 = spec.concat_width(), rank = spec.dcn.low_rank;
  for (int l = 0; l < spec.dcn.layers; ++l) {
    const std::string p = absl::StrCat("dcn.", l);
    if (rank > 0) {
      plan.push_back({{p + ".V.weight", "F32", {rank, d0}}, 0.5f / std::sqrt(float(d0))});
      plan.push_back({{p + ".U.weight", "F32", {d0, rank}}, 0.5f / std::sqrt(float(rank))});
    } else {
      plan.push_back({{p + ".W.weight", "F32", {d0, d0}}, 0.5f / std::sqrt(float(d0))});
    }
    plan.push_back({{p + ".bias", "F32", {d0}}, 0.1f});
  }
  for (size_t i = 0; i < spec.top_mlp.size(); ++i) {
    layer(absl::StrCat("top_mlp.", i), in, spec.top_mlp[i]);
    in = spec.top_mlp[i];
  }
  const std::string dtype(engine::SafetensorsDType(spec.embedding_dtype));
  for (const engine::TableSpec& t : spec.tables) {
    plan.push_back({{absl::StrCat("embeddings.", t.name, ".weight"), dtype, {t.rows, t.dim}},
                    std::sqrt(6.0f / t.dim) / 2,
                    true});
  }
  return plan;
}

// The size of the weights file: the tensors' bytes and (a bound on) the header's.
uint64_t WeightsFileBytes(const std::vector<PlannedTensor>& plan) {
  unsigned __int128 bytes = 1024;  // the length, the metadata, the padding
  for (const PlannedTensor& p : plan) {
    unsigned __int128 tensor = engine::SafetensorsDTypeSize(p.entry.dtype);
    for (int64_t d : p.entry.shape) tensor *= static_cast<uint64_t>(d);
    bytes += tensor + p.entry.name.size() + 128;  // the header's entry of the tensor
  }
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  return bytes > kMax ? kMax : static_cast<uint64_t>(bytes);
}

absl::Status WriteWeights(const std::vector<PlannedTensor>& plan, uint64_t seed,
                          const std::string& path) {
  std::vector<SafetensorsWriter::Entry> entries;
  for (const PlannedTensor& p : plan) entries.push_back(p.entry);
  ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::Create(path, std::move(entries),
                                                          {{"format", "pt"},
                                                           {"generator", "fuserank-gen-model"},
                                                           {"seed", absl::StrCat(seed)}}));
  for (const PlannedTensor& p : plan) {
    RETURN_IF_ERROR(WriteTensor(p, seed, writer.get()));
  }
  return writer->Close();
}

}  // namespace fuserank::tools
