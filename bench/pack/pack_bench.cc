// fuserank-pack-bench: the CUDA backend's host side of a batch, timed on the CPU (no GPU
// needed): BatchPacker::Plan and Write (engine/cuda/batch_packer.h), which every GPU batch
// runs on its worker thread before the copy to the device. The bench model
// (bench/out/model/bench.yaml, or --model=), one request per batch with one uniform id
// per bag, at 16, 256 and 1024 candidates; 64 distinct batches cycled, each written into
// one reused buffer. docs/benchmarks.md.
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "benchmark/benchmark.h"
#include "engine/batch.h"
#include "engine/cuda/batch_packer.h"
#include "engine/model.h"

namespace fuserank::bench {
namespace {

constexpr int kPool = 64;

std::shared_ptr<const engine::Model>& BenchModel() {
  static std::shared_ptr<const engine::Model> model;
  return model;
}

// One request of `n` candidates: every bag one uniform row of its table, top 100 (or
// all), dense values of 0.5.
engine::Batch OneRequest(const engine::Model& model, uint32_t n, std::mt19937_64& rng) {
  engine::Batch batch;
  batch.candidate_begin = {0, n};
  batch.top_k = {n < 100 ? n : 100};
  auto bag = [&](engine::BagSet* bags, int table) {
    bags->rows.push_back(static_cast<int32_t>(rng() % model.tables()[table].rows));
    bags->weights.push_back(1.0f);
    bags->bag_begin.push_back(static_cast<uint32_t>(bags->rows.size()));
  };
  for (int t : model.user_tables()) bag(&batch.user, t);
  for (uint32_t c = 0; c < n; ++c) {
    for (int t : model.item_tables()) bag(&batch.item, t);
  }
  batch.user_dense.assign(model.spec().dense_user, 0.5f);
  batch.item_dense.assign(size_t{n} * model.spec().dense_item, 0.5f);
  return batch;
}

void BM_BatchPack(benchmark::State& state) {
  const engine::Model& model = *BenchModel();
  std::mt19937_64 rng(7);
  std::vector<engine::Batch> pool;
  for (int i = 0; i < kPool; ++i) {
    pool.push_back(OneRequest(model, static_cast<uint32_t>(state.range(0)), rng));
  }
  engine::cuda::BatchPacker packer(engine::cuda::MakePackInfo(model), /*reorder_ids=*/false);
  std::vector<unsigned char> packed;
  size_t i = 0;
  for (auto _ : state) {
    const engine::Batch& batch = pool[i++ % pool.size()];
    absl::StatusOr<kernels::PackedHeader> h = packer.Plan(batch);
    if (!h.ok()) {
      state.SkipWithError(std::string(h.status().message()).c_str());
      break;
    }
    if (packed.size() < h->total_bytes) packed.resize(h->total_bytes);
    packer.Write(batch, *h, packed.data());
    benchmark::DoNotOptimize(packed.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BatchPack)
    ->ArgName("candidates")
    ->Arg(16)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fuserank::bench

int main(int argc, char** argv) {
  std::string path = "bench/out/model/bench.yaml";
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (absl::StartsWith(argv[i], "--model=")) {
      path = argv[i] + std::strlen("--model=");
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  absl::StatusOr<std::shared_ptr<const fuserank::engine::Model>> model =
      fuserank::engine::Model::Load(path);
  if (!model.ok()) {
    std::fprintf(stderr,
                 "fuserank-pack-bench: %s (make the bench model with "
                 "bench/models/gen_bench_model.sh)\n",
                 std::string(model.status().message()).c_str());
    return 1;
  }
  fuserank::bench::BenchModel() = *model;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
