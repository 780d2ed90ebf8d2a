// Microbenchmarks of the CPU pooled lookup (engine/cpu/cpu_lookup.h) over one table's content
// stored as fp32, fp16, bf16 and int8 rows (bandwidth and memory of int8 rows).
// Two shapes: `cache` (10k x 32, about 1.3 MB in fp32: fits this machine's L2/L3) and
// `dram` (4Mi x 64, 1 GiB in fp32: 32x the 32 MiB L3), each with Zipf(1.05) and uniform
// ids; bags of kBagSize ids (weight 1, sum pooling), kBagsPerCall bags per call, cycling
// through a fixed pool of ids so that successive calls read different rows.
// Reported per benchmark: items = ids looked up (rows/s); bytes = ids x (row bytes +
// 8 qparams bytes for int8), the logical bytes the lookup reads (cache lines touched can
// be more); counters read_bytes_per_id, table_MiB (rows x row bytes + qparams, resident),
// max_abs_err (pooled vs the fp32 table, over the first 256 bags).
// The tables are built here in memory as EmbeddingTable over aligned buffers: fp16/bf16
// round to nearest even (engine/cpu/cpu_dtype.h), int8 quantizes each row as docs/export.md
// ("int8 rows") and tools/fuserank_export_writer.py do.
// Run: bench/run_dtype_bench.sh, or build/bin/fuserank-microbench
//   --benchmark_filter='^LookupDtype/' --benchmark_repetitions=5
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "engine/cpu/cpu_dtype.h"
#include "engine/cpu/cpu_lookup.h"
#include "engine/model.h"

namespace fuserank::engine {
namespace {

constexpr int kBagSize = 8;
constexpr int kBagsPerCall = 256;
constexpr int kIdsPerCall = kBagSize * kBagsPerCall;
constexpr int kCheckBags = 256;  // bags compared with the fp32 table for max_abs_err

struct Shape {
  const char* name;
  int64_t rows;
  int dim;
  int64_t pool_ids;  // ids cycled through: a multiple of kIdsPerCall
};
constexpr Shape kShapes[] = {
    {"cache_10k_x32", 10000, 32, 1 << 16},
    {"dram_4Mi_x64", int64_t{1} << 22, 64, 1 << 20},
};
constexpr int kNumShapes = 2;

enum class Dist { kZipf, kUniform };
constexpr int kNumDTypes = 4;
constexpr DType kDTypes[kNumDTypes] = {DType::kF32, DType::kF16, DType::kBF16, DType::kInt8};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, FreeDeleter>;

Buffer Allocate(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, std::max<size_t>(rounded, 64)));
  if (p == nullptr) {
    std::fprintf(stderr, "lookup_dtype_bench: cannot allocate %zu bytes\n", bytes);
    std::abort();
  }
  return Buffer(p);
}

// One table's rows in one dtype, with the buffers it points into.
struct StoredTable {
  EmbeddingTable table;
  Buffer data;
  Buffer qparams;
  size_t resident_bytes = 0;     // rows x row_bytes + qparams
  size_t read_bytes_per_id = 0;  // row_bytes (+ 8 for int8's scale and bias)
  double max_abs_err = 0.0;      // pooled vs the fp32 table
};

EmbeddingTable TableShape(const Shape& shape, DType dtype, size_t element_bytes) {
  EmbeddingTable t;
  t.name = absl::StrCat(shape.name, "_", std::string(DTypeName(dtype)));
  t.pooling = Pooling::kSum;
  t.dtype = dtype;
  t.rows = shape.rows;
  t.dim = shape.dim;
  t.row_bytes = element_bytes * shape.dim;
  return t;
}

// fp32 rows, bell-shaped with standard deviation about 1/sqrt(dim) (as fuserank-gen-model).
StoredTable MakeF32(const Shape& shape, uint64_t seed) {
  StoredTable s;
  s.table = TableShape(shape, DType::kF32, sizeof(float));
  const size_t n = static_cast<size_t>(shape.rows) * shape.dim;
  s.data = Allocate(n * sizeof(float));
  float* values = reinterpret_cast<float*>(s.data.get());
  const float scale = 2.45f / std::sqrt(static_cast<float>(shape.dim));  // sd of tri(-1,1)
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  auto uniform = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<float>(x >> 40) / static_cast<float>(1 << 24);
  };
  for (size_t i = 0; i < n; ++i) values[i] = scale * (uniform() - uniform());
  s.table.data = s.data.get();
  s.resident_bytes = n * sizeof(float);
  s.read_bytes_per_id = s.table.row_bytes;
  return s;
}

StoredTable MakeHalf(const Shape& shape, const float* src, DType dtype) {
  StoredTable s;
  s.table = TableShape(shape, dtype, sizeof(uint16_t));
  const size_t n = static_cast<size_t>(shape.rows) * shape.dim;
  s.data = Allocate(n * sizeof(uint16_t));
  auto* out = reinterpret_cast<uint16_t*>(s.data.get());
  for (size_t i = 0; i < n; ++i) {
    out[i] = dtype == DType::kF16 ? FloatToHalf(src[i]) : FloatToBFloat16(src[i]);
  }
  s.table.data = s.data.get();
  s.resident_bytes = n * sizeof(uint16_t);
  s.read_bytes_per_id = s.table.row_bytes;
  return s;
}

// Row-wise int8 exactly as docs/export.md "int8 rows": lo -> -128, hi -> 127, in double.
StoredTable MakeInt8(const Shape& shape, const float* src) {
  StoredTable s;
  s.table = TableShape(shape, DType::kInt8, sizeof(int8_t));
  const size_t n = static_cast<size_t>(shape.rows) * shape.dim;
  s.data = Allocate(n);
  s.qparams = Allocate(static_cast<size_t>(shape.rows) * 2 * sizeof(float));
  auto* q = reinterpret_cast<int8_t*>(s.data.get());
  auto* qp = reinterpret_cast<float*>(s.qparams.get());
  for (int64_t r = 0; r < shape.rows; ++r) {
    const float* x = src + r * shape.dim;
    int8_t* qr = q + r * shape.dim;
    const auto [lo_it, hi_it] = std::minmax_element(x, x + shape.dim);
    const double lo = *lo_it, hi = *hi_it;
    const float scale = static_cast<float>((hi - lo) / 255.0);
    const float bias =
        scale == 0.0f ? static_cast<float>(lo) : static_cast<float>(lo + 128.0 * scale);
    for (int j = 0; j < shape.dim; ++j) {
      const double level = scale == 0.0f ? 0.0 : std::nearbyint((x[j] - bias) / double{scale});
      qr[j] = static_cast<int8_t>(std::clamp(level, -128.0, 127.0));
    }
    qp[2 * r] = scale;
    qp[2 * r + 1] = bias;
  }
  s.table.data = s.data.get();
  s.table.qparams = qp;
  s.resident_bytes = n + static_cast<size_t>(shape.rows) * 2 * sizeof(float);
  s.read_bytes_per_id = s.table.row_bytes + 2 * sizeof(float);
  return s;
}

// Zipf(alpha) ranks over [0, n) by inverse CDF, scattered by an odd multiplier mod n
// (as bench/engine_bench.cc, so hot rows are spread over the table).
std::vector<int32_t> ZipfIds(int64_t n, double alpha, int64_t count, std::mt19937_64& rng) {
  std::vector<double> cdf(n);
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) cdf[k] = sum += std::pow(static_cast<double>(k + 1), -alpha);
  for (double& c : cdf) c /= sum;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int32_t> ids(count);
  for (int32_t& id : ids) {
    const int64_t rank = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
    id = static_cast<int32_t>((std::min(rank, n - 1) * 2654435761ll + 12345) % n);
  }
  return ids;
}

std::vector<int32_t> UniformIds(int64_t n, int64_t count, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> dist(0, n - 1);
  std::vector<int32_t> ids(count);
  for (int32_t& id : ids) id = static_cast<int32_t>(dist(rng));
  return ids;
}

// A CSR of pool_ids / kBagSize bags; call c pools bags [c * kBagsPerCall, ...).
struct IdPool {
  std::vector<uint32_t> bag_begin;
  std::vector<int32_t> rows;
  std::vector<float> weights;
  int calls = 0;
};

IdPool MakePool(std::vector<int32_t> ids) {
  IdPool pool;
  pool.rows = std::move(ids);
  pool.weights.assign(pool.rows.size(), 1.0f);
  for (size_t i = 0; i <= pool.rows.size(); i += kBagSize) pool.bag_begin.push_back(i);
  pool.calls = static_cast<int>(pool.rows.size() / kIdsPerCall);
  return pool;
}

struct ShapeEnv {
  std::array<StoredTable, kNumDTypes> tables;  // in kDTypes order
  std::array<IdPool, 2> pools;                 // indexed by Dist
};

double MaxAbsErr(const StoredTable& t, const StoredTable& ref, const IdPool& pool) {
  const int dim = t.table.dim;
  std::vector<float> a(static_cast<size_t>(kCheckBags) * dim), b(a.size());
  PooledLookup(t.table, pool.bag_begin.data(), pool.rows.data(), pool.weights.data(), 0, 1,
               kCheckBags, a.data(), dim);
  PooledLookup(ref.table, pool.bag_begin.data(), pool.rows.data(), pool.weights.data(), 0, 1,
               kCheckBags, b.data(), dim);
  double err = 0.0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::fabs(double{a[i]} - b[i]));
  return err;
}

ShapeEnv* BuildEnv(int shape_index) {
  const Shape& shape = kShapes[shape_index];
  auto* env = new ShapeEnv;
  env->tables[0] = MakeF32(shape, 11 + shape_index);
  const float* src = reinterpret_cast<const float*>(env->tables[0].data.get());
  env->tables[1] = MakeHalf(shape, src, DType::kF16);
  env->tables[2] = MakeHalf(shape, src, DType::kBF16);
  env->tables[3] = MakeInt8(shape, src);
  std::mt19937_64 rng(21 + shape_index);
  env->pools[static_cast<int>(Dist::kZipf)] =
      MakePool(ZipfIds(shape.rows, 1.05, shape.pool_ids, rng));
  env->pools[static_cast<int>(Dist::kUniform)] =
      MakePool(UniformIds(shape.rows, shape.pool_ids, rng));
  for (StoredTable& t : env->tables) {
    t.max_abs_err = MaxAbsErr(t, env->tables[0], env->pools[static_cast<int>(Dist::kUniform)]);
  }
  return env;
}

// Built on first use, so a filter that skips a shape never allocates its tables.
ShapeEnv& Env(int shape_index) {
  static std::array<ShapeEnv*, kNumShapes> envs{};
  if (envs[shape_index] == nullptr) envs[shape_index] = BuildEnv(shape_index);
  return *envs[shape_index];
}

void BM_LookupDtype(benchmark::State& state, int shape_index, Dist dist, int dtype_index) {
  ShapeEnv& env = Env(shape_index);
  const StoredTable& t = env.tables[dtype_index];
  const IdPool& pool = env.pools[static_cast<int>(dist)];
  const int dim = t.table.dim;
  std::vector<float> out(static_cast<size_t>(kBagsPerCall) * dim);
  int call = 0;
  for (auto _ : state) {
    PooledLookup(t.table, pool.bag_begin.data(), pool.rows.data(), pool.weights.data(),
                 call * kBagsPerCall, 1, kBagsPerCall, out.data(), dim);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    if (++call == pool.calls) call = 0;
  }
  const int64_t ids = state.iterations() * kIdsPerCall;
  state.SetItemsProcessed(ids);
  state.SetBytesProcessed(ids * static_cast<int64_t>(t.read_bytes_per_id));
  state.counters["read_bytes_per_id"] = static_cast<double>(t.read_bytes_per_id);
  state.counters["table_MiB"] = static_cast<double>(t.resident_bytes) / (1 << 20);
  state.counters["max_abs_err"] = t.max_abs_err;
}

// Names: LookupDtype/<shape>/<zipf|uniform>/<dtype>.
const bool kRegistered = [] {
  for (int s = 0; s < kNumShapes; ++s) {
    for (Dist dist : {Dist::kZipf, Dist::kUniform}) {
      for (int d = 0; d < kNumDTypes; ++d) {
        const std::string name = absl::StrCat("LookupDtype/", kShapes[s].name, "/",
                                              dist == Dist::kZipf ? "zipf" : "uniform", "/",
                                              std::string(DTypeName(kDTypes[d])));
        benchmark::RegisterBenchmark(name.c_str(), BM_LookupDtype, s, dist, d)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace fuserank::engine
