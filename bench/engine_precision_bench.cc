// engine.cpu_precision side by side: the bench model's MLP and whole Backend::Run() at
// fp32 (the reference) and bf16 (AVX512_BF16 dot products with fp32 sums), one thread, at
// 16, 256 and 1024 candidates, on the process's ISA. Skipped with the reason where the
// CPU cannot run bf16. GFLOPs counts the same multiply-adds for both precisions;
// of_peak is their share of the fp32 FMA peak (bf16 dot instructions can exceed 1).
// Run: build/bin/fuserank-microbench --benchmark_filter=Precision
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bench/engine_bench_env.h"
#include "benchmark/benchmark.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_plan.h"
#include "engine/cpu/cpu_simd.h"
#include "engine/cpu/sgemm_bf16.h"

namespace fuserank::engine {
namespace {

using bench::Env;

CpuPrecision PrecisionArg(const benchmark::State& state, int index) {
  return state.range(index) == 0 ? CpuPrecision::kFp32 : CpuPrecision::kBf16;
}

const char* PrecisionName(CpuPrecision precision) {
  return precision == CpuPrecision::kFp32 ? "fp32" : "bf16";
}

// The plan at `precision`, built once per process.
const CpuPlan* PlanAt(CpuPrecision precision, benchmark::State& state) {
  if (precision == CpuPrecision::kFp32) return &Env().plan;
  static const absl::StatusOr<CpuPlan>* bf16 =
      new absl::StatusOr<CpuPlan>(BuildCpuPlan(*Env().model, CpuPrecision::kBf16));
  if (!bf16->ok()) {
    state.SkipWithError(std::string(bf16->status().message()).c_str());
    return nullptr;
  }
  return &**bf16;
}

// The core's bf16 dot peak beside its fp32 FMA peak (BM_PeakFma), one thread.
void BM_PeakBf16Dot(benchmark::State& state) {
  if (absl::Status available = Bf16KernelsAvailable(); !available.ok()) {
    state.SkipWithError(std::string(available.message()).c_str());
    return;
  }
  constexpr int64_t kIterations = 100000;
  double gflops = 0;
  for (auto _ : state) gflops = MeasureBf16DotGflops(kIterations, 1);
  state.counters["GFLOPs"] = gflops;
  state.counters["of_fp32_peak"] = gflops / bench::PeakGflops(ActiveCpuIsa());
}
BENCHMARK(BM_PeakBf16Dot)->Unit(benchmark::kMicrosecond);

void BM_EngineMlpPrecision(benchmark::State& state) {
  const int candidates = static_cast<int>(state.range(0));
  const CpuPrecision precision = PrecisionArg(state, 1);
  const CpuPlan* plan = PlanAt(precision, state);
  if (plan == nullptr) return;
  bench::TimeMlpTiles(state, *plan, candidates);
  state.SetItemsProcessed(state.iterations() * candidates);
  bench::SetFlopCounters(state, "", bench::MlpFlops(*plan) * candidates * state.iterations(),
                         ActiveCpuIsa());
  state.SetLabel(PrecisionName(precision));
}
BENCHMARK(BM_EngineMlpPrecision)
    ->ArgNames({"candidates", "bf16"})
    ->ArgsProduct({{16, 256, 1024}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

void BM_EngineRunPrecision(benchmark::State& state) {
  const int candidates = static_cast<int>(state.range(0));
  const CpuPrecision precision = PrecisionArg(state, 1);
  if (precision == CpuPrecision::kBf16) {
    if (absl::Status available = Bf16KernelsAvailable(); !available.ok()) {
      state.SkipWithError(std::string(available.message()).c_str());
      return;
    }
  }
  BackendOptions options;
  options.workers = 1;
  options.cpu_precision = precision;
  std::unique_ptr<Backend> backend = CreateCpuBackend(Env().model, options);
  const StageTimes stages =
      bench::RunBatches(state, *backend, Env().batches[bench::SizeIndex(candidates)]);
  state.SetItemsProcessed(state.iterations() * candidates);
  bench::SetStageCounters(state, stages);
  state.SetLabel(PrecisionName(precision));
}
BENCHMARK(BM_EngineRunPrecision)
    ->ArgNames({"candidates", "bf16"})
    ->ArgsProduct({{16, 256, 1024}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fuserank::engine
