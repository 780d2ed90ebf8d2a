// The CUDA backend's data path emulated on the host, from the packed batch, the GpuLayout
// and the device rows alone (the addresses the kernels read and write, the id-reorder
// gather into slots, the int8 decode of kernels/int8_rows.h; not their thread mapping),
// against the independent double reference: catches a wrong column, pitch, slot, section
// or row offset without a GPU. Dot / concat / linear, fp32 / fp16 / bf16 / int8, dims 4 to
// 128, with and without a bottom MLP, id reorder on and off. The pooled blocks are also
// checked against the CPU engine's PooledLookup (int8 on its AVX2+FMA path: bit for bit)
// and, for int8, the scores against the CPU engine's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_dtype.h"
#include "engine/cpu/cpu_lookup.h"
#include "engine/cpu/cpu_simd.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/device_rows.h"
#include "engine/cuda/gpu_layout.h"
#include "gtest/gtest.h"
#include "kernels/batch_layout.h"
#include "kernels/int8_rows.h"
#include "kernels/layout_math.h"
#include "kernels/topk_keys.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

using kernels::PackedHeader;
using kernels::Section;

using Fixture = test::BatchFixture;
constexpr auto MakeFixture = test::MakeBatchFixture;

// Element e of a device row (engine/cuda/device_rows.h) of a table of `type`.
float DeviceElement(kernels::RowType type, const std::byte* row, int dim, int e) {
  uint16_t bits;
  switch (type) {
    case kernels::RowType::kF16:
      std::memcpy(&bits, row + 2 * e, 2);
      return HalfToFloat(bits);
    case kernels::RowType::kBF16:
      std::memcpy(&bits, row + 2 * e, 2);
      return BFloat16ToFloat(bits);
    case kernels::RowType::kInt8: {
      float params[2];
      std::memcpy(params, row + kernels::Int8ParamsOffset(dim), sizeof(params));
      return kernels::DequantizeInt8(static_cast<int8_t>(row[e]), params[0], params[1]);
    }
    default: {
      float f;
      std::memcpy(&f, row + 4 * e, 4);
      return f;
    }
  }
}

// What DeviceModel::Upload copies for lookup table k: the device rows of every table.
std::vector<std::vector<std::byte>> DeviceTables(const Model& m, const GpuLayout& g) {
  std::vector<std::vector<std::byte>> out;
  for (size_t k = 0; k < g.lookup.size(); ++k) {
    const EmbeddingTable& t = m.tables()[g.lookup_spec_index[k]];
    EXPECT_EQ(g.lookup[k].row_bytes, DeviceRowBytes(t));
    std::vector<std::byte>& rows =
        out.emplace_back(static_cast<size_t>(t.rows) * DeviceRowBytes(t));
    if (DeviceRowsAreStored(t)) {
      std::memcpy(rows.data(), t.data, rows.size());
    } else {
      PackInt8Rows(t, 0, t.rows, rows.data());
    }
  }
  return out;
}

// The gather pass: unique row s of the packed list copied to slot s (stride bytes apart).
std::vector<std::byte> Gather(const std::vector<std::vector<std::byte>>& tables, const GpuLayout& g,
                              const unsigned char* base, const PackedHeader& h) {
  std::vector<std::byte> gathered(size_t{h.num_unique} * g.gather_stride);
  const kernels::UniqueRow* unique = Section<kernels::UniqueRow>(base, h.unique_rows);
  for (uint32_t s = 0; s < h.num_unique; ++s) {
    const uint32_t bytes = g.lookup[unique[s].table].row_bytes;
    EXPECT_LE(bytes, g.gather_stride);
    std::memcpy(gathered.data() + size_t{s} * g.gather_stride,
                tables[unique[s].table].data() + static_cast<size_t>(unique[s].row) * bytes, bytes);
  }
  return gathered;
}

void Dense(const DenseLayer& l, const float* in, float* out) {
  for (int o = 0; o < l.out; ++o) {
    double acc = l.bias[o];
    for (int i = 0; i < l.in; ++i) acc += double{l.weight[size_t{1} * o * l.in + i]} * in[i];
    out[o] = static_cast<float>(l.relu && acc < 0 ? 0.0 : acc);
  }
}

// The emulated device buffers after a batch: the pooled user block, the pooled item block
// (dot) or h (concat, linear: item vectors are pooled into it), and every score.
struct Emulated {
  std::vector<float> user;
  std::vector<float> item;
  std::vector<float> h;
  std::vector<float> scores;
};

// Computed the way the kernels address memory: bags and dense rows from the packed
// sections, rows from the device tables (or, `gathered` set, from the gathered slots the
// packed rows name), pooled vectors at GpuLayout columns, h built by the slot lists, the
// MLP with the layout's pitches. Pools as the kernel does: fmaf(w, x, acc) in id order.
Emulated EmulateGpu(const Model& m, const GpuLayout& g, const std::vector<unsigned char>& buf,
                    const std::vector<std::vector<std::byte>>& tables,
                    const std::vector<std::byte>* gathered) {
  PackedHeader h;
  std::memcpy(&h, buf.data(), sizeof(h));
  const unsigned char* base = buf.data();
  const uint32_t n = h.num_candidates;
  std::vector<float> x(size_t{n} * std::max(g.x_ld, 1), NAN);
  Emulated em;
  std::vector<float>& hbuf = em.h;
  std::vector<float>& user = em.user;
  std::vector<float>& item = em.item;
  hbuf.assign(size_t{n} * g.h_ld, NAN);
  user.assign(size_t{h.num_requests} * g.user_ld, NAN);
  item.assign(size_t{n} * g.item_ld, NAN);
  const bool dot = g.interaction == Interaction::kDot;
  auto pool = [&](uint32_t bag, uint32_t begin_off, uint32_t rows_off, uint32_t weights_off, int k,
                  float* out) {
    const kernels::LookupTable& d = g.lookup[k];
    const std::byte* rows_base = gathered ? gathered->data() : tables[k].data();
    const size_t stride = gathered ? g.gather_stride : d.row_bytes;
    const uint32_t* begin = Section<uint32_t>(base, begin_off);
    const int32_t* rows = Section<int32_t>(base, rows_off);
    const float* weights = h.has_weights ? Section<float>(base, weights_off) : nullptr;
    for (int e = 0; e < d.dim; ++e) {
      float acc = 0, wsum = 0;
      for (uint32_t j = begin[bag]; j < begin[bag + 1]; ++j) {
        const float w = weights ? weights[j] : 1.0f;
        const std::byte* row = rows_base + static_cast<size_t>(rows[j]) * stride;
        acc = std::fma(w, DeviceElement(g.row_type, row, d.dim, e), acc);
        wsum += w;
      }
      out[d.out_col + e] = d.mean ? (wsum != 0 ? acc / wsum : 0.0f) : acc;
    }
  };
  for (uint32_t b = 0; b < h.num_item_bags; ++b) {
    const int k = g.user_tables + static_cast<int>(b % g.item_tables);
    float* out = (dot ? item.data() + size_t{b / g.item_tables} * g.item_ld
                      : hbuf.data() + size_t{b / g.item_tables} * g.h_ld);
    pool(b, h.item_bag_begin, h.item_rows, h.item_weights, k, out);
  }
  for (uint32_t b = 0; b < h.num_user_bags; ++b) {
    const int k = static_cast<int>(b % g.user_tables);
    pool(b, h.user_bag_begin, h.user_rows, h.user_weights, k,
         user.data() + size_t{b / g.user_tables} * g.user_ld);
  }
  const uint32_t* cb = Section<uint32_t>(base, h.candidate_begin);
  std::vector<float> tmp(g.hidden_ld), tmp2(g.hidden_ld);
  std::vector<float>& scores = em.scores;
  scores.assign(n, NAN);
  for (uint32_t c = 0; c < n; ++c) {
    const uint32_t r = kernels::RequestOfCandidate(cb, h.num_requests, c);
    float* xrow = g.bottom_mlp ? x.data() + size_t{c} * g.x_ld : hbuf.data() + size_t{c} * g.h_ld;
    for (int e = 0; e < g.dense_user; ++e) {
      xrow[e] = Section<float>(base, h.user_dense)[size_t{r} * g.dense_user + e];
    }
    for (int e = 0; e < g.dense_item; ++e) {
      xrow[g.dense_user + e] = Section<float>(base, h.item_dense)[size_t{c} * g.dense_item + e];
    }
    float* hrow = hbuf.data() + size_t{c} * g.h_ld;
    if (g.bottom_mlp) {
      const float* in = xrow;
      for (size_t l = 0; l < m.bottom_mlp().size(); ++l) {
        const bool last = l + 1 == m.bottom_mlp().size();
        float* out = last ? hrow : (l % 2 ? tmp2.data() : tmp.data());
        Dense(m.bottom_mlp()[l], in, out);
        in = out;
      }
    }
    if (dot) {
      std::vector<const float*> v;
      if (g.z_width > 0) v.push_back(hrow);
      for (const kernels::DotSlot& s : g.dot_slots) {
        v.push_back(s.user ? user.data() + size_t{r} * g.user_ld + s.col
                           : item.data() + size_t{c} * g.item_ld + s.col);
      }
      for (uint32_t p = 0; p < kernels::NumPairs(v.size()); ++p) {
        uint32_t i, j;
        kernels::PairFromIndex(p, &i, &j);
        float sum = 0;
        for (int e = 0; e < g.dim; ++e) sum += v[i][e] * v[j][e];
        hrow[g.z_width + p] = sum;
      }
    } else {
      for (const kernels::ConcatSlot& s : g.concat_slots) {
        for (int e = 0; e < s.dim; ++e) {
          hrow[s.h_col + e] = user[size_t{r} * g.user_ld + s.user_col + e];
        }
      }
    }
    for (int e = 0; e < g.h_width; ++e)
      EXPECT_FALSE(std::isnan(hrow[e])) << "unwritten h col " << e;
    const float* in = hrow;
    float logit = NAN;
    for (size_t l = 0; l < m.top_mlp().size(); ++l) {
      const bool last = l + 1 == m.top_mlp().size();
      float* out = last ? &logit : (l % 2 ? tmp2.data() : tmp.data());
      Dense(m.top_mlp()[l], in, out);
      in = out;
    }
    scores[c] = kernels::Sigmoid(logit);
  }
  return em;
}

// Compares the emulated pooled blocks, table by table, with the CPU engine's PooledLookup
// into the same layout: int8 on the CPU's AVX2+FMA path within 2e-6 relative (the kernel
// decodes and adds with fmaf, kernels/int8_rows.h, as that path does where the compiler
// fuses its multiply-adds, which an optimised build does: then the bits are equal; a
// sanitizer build at -O1 does not fuse them and differs in the last bit); otherwise
// within 1e-5 (the generic CPU path rounds twice; the fp16 AVX2 path adds unfused).
void ExpectPooledLikeTheCpuEngine(const Model& m, const GpuLayout& g, const Batch& batch,
                                  const Emulated& em) {
  const bool tight = g.row_type == kernels::RowType::kInt8 && CpuHasAvx2Fma();
  const bool dot = g.interaction == Interaction::kDot;
  auto check = [&](const std::vector<float>& got, const std::vector<float>& want, int rows, int ld,
                   int col, int dim, const std::string& what) {
    for (int r = 0; r < rows; ++r) {
      for (int e = col; e < col + dim; ++e) {
        const float gv = got[size_t{1} * r * ld + e];
        const float wv = want[size_t{1} * r * ld + e];
        if (tight) {
          ASSERT_NEAR(gv, wv, 2e-6 * std::max(1.0f, std::fabs(wv)))
              << what << " row " << r << " col " << e;
        } else {
          ASSERT_NEAR(gv, wv, 1e-5 * std::max(1.0f, std::fabs(wv)))
              << what << " row " << r << " col " << e;
        }
      }
    }
  };
  const int requests = batch.num_requests();
  const int candidates = batch.num_candidates();
  for (int k = 0; k < g.user_tables + g.item_tables; ++k) {
    const EmbeddingTable& t = m.tables()[g.lookup_spec_index[k]];
    const bool user = k < g.user_tables;
    const int rows = user ? requests : candidates;
    const int ld = user ? g.user_ld : g.item_ld;
    std::vector<float> want(size_t{1} * rows * ld, 0.0f);
    const int table = user ? k : k - g.user_tables;
    PooledLookup(t, user ? batch.user : batch.item, table, user ? g.user_tables : g.item_tables,
                 rows, want.data() + g.lookup[k].out_col, ld);
    check(user ? em.user : (dot ? em.item : em.h), want, rows, ld, g.lookup[k].out_col, t.dim,
          "table '" + t.name + "'");
  }
}

// The model, requests and batch of a case: MakeBatchFixture's; for int8, a model whose
// tables are codes with a drawn (scale, bias) per row (BuildVariantModel: the test model
// holds the dequantized values, which the reference then uses).
Fixture MakeCaseFixture(const ModelSpec& spec, uint64_t seed, const std::vector<int>& sizes) {
  if (spec.embedding_dtype != DType::kInt8) return MakeFixture(spec, seed, sizes);
  Fixture f;
  std::mt19937_64 rng(seed);
  auto model = test::BuildVariantModel(spec, seed, rng, &f.test_model);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return f;
  f.model = *model;
  for (int n : sizes) {
    test::RequestShape shape;
    shape.candidates = n;
    f.requests.push_back(test::RandomRequest(spec, shape, rng));
    f.requests.back().top_k = static_cast<uint32_t>(rng() % (n + 2));
  }
  f.batch = test::MakeBatch(f.model, f.requests);
  return f;
}

struct EmulationCase {
  Interaction interaction;
  DType dtype;
  int dim;
  bool bottom;
  bool reorder;
};

class GpuEmulationTest : public ::testing::TestWithParam<EmulationCase> {};

TEST_P(GpuEmulationTest, PackedBatchAndLayoutGiveTheReferenceScores) {
  const EmulationCase p = GetParam();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  ModelSpec spec = fuserank::testing::SmallSpec(2, 3, 40, p.dim);
  std::swap(spec.tables[1], spec.tables[3]);  // interleave user and item tables
  spec.tables[2].pooling = Pooling::kMean;
  spec.embedding_dtype = p.dtype;
  spec.interaction = p.interaction;
  if (p.interaction == Interaction::kLinear) spec.cross_dim = 6;
  if (!p.bottom) {
    spec.bottom_mlp.clear();
    if (p.interaction == Interaction::kDot) {
      spec.dense_user = p.dim / 2;
      spec.dense_item = p.dim - p.dim / 2;
    }
  }
  spec.top_mlp = {fuserank::testing::TopInputWidth(spec) > 0 ? 16 : 1, 1};
  Fixture f = MakeCaseFixture(spec, seed, {1, 7, 0, 12});
  ASSERT_NE(f.model, nullptr);
  auto layout = ComputeGpuLayout(*f.model);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->row_type, RowTypeOf(p.dtype));
  BatchPacker packer(MakePackInfo(*f.model), p.reorder);
  auto h = packer.Plan(f.batch);
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<unsigned char> buf(h->total_bytes);
  packer.Write(f.batch, *h, buf.data());
  const std::vector<std::vector<std::byte>> tables = DeviceTables(*f.model, *layout);
  std::vector<std::byte> gathered;
  if (p.reorder) gathered = Gather(tables, *layout, buf.data(), *h);
  const Emulated em = EmulateGpu(*f.model, *layout, buf, tables, p.reorder ? &gathered : nullptr);
  ASSERT_NO_FATAL_FAILURE(ExpectPooledLikeTheCpuEngine(*f.model, *layout, f.batch, em));
  int c = 0;
  for (size_t r = 0; r < f.requests.size(); ++r) {
    for (size_t i = 0; i < f.requests[r].candidates.size(); ++i, ++c) {
      const double want = test::ReferenceScore(f.test_model, f.requests[r], static_cast<int>(i));
      EXPECT_NEAR(em.scores[c], want, 1e-5) << "request " << r << " candidate " << i;
    }
  }
  if (p.dtype != DType::kInt8) return;
  // The CPU engine's int8 scores of the same batch, every candidate.
  Batch all = f.batch;
  for (int r = 0; r < all.num_requests(); ++r) {
    all.top_k[r] = all.candidate_begin[r + 1] - all.candidate_begin[r];
  }
  std::unique_ptr<Backend> cpu = CreateCpuBackend(f.model, BackendOptions{});
  BatchResult result;
  const std::vector<std::vector<float>> cpu_scores = test::ScoresByIndex(*cpu, 0, all, result);
  c = 0;
  for (size_t r = 0; r < cpu_scores.size(); ++r) {
    for (size_t i = 0; i < cpu_scores[r].size(); ++i, ++c) {
      EXPECT_NEAR(em.scores[c], cpu_scores[r][i], 1e-5) << "CPU engine, request " << r << " " << i;
    }
  }
}

// A mean-pooled bag whose weights cancel exactly, {1, 2^-24, -1, -2^-24}, in a user and
// an item table: the kernels add weights in float (here -2^-24), so the packer zeroes such
// a bag's weights and the pooled vector is the zero vector (SPEC section 2), as on the CPU
// engine and in the double reference, not the bag divided by -2^-24.
TEST(GpuEmulationMeanTest, WeightsThatCancelPoolToTheZeroVectorAsOnTheCpu) {
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  ModelSpec spec = fuserank::testing::SmallSpec(1, 2, 40, 8);
  spec.tables[0].pooling = Pooling::kMean;  // user_0
  spec.tables[1].pooling = Pooling::kMean;  // item_0
  Fixture f = MakeCaseFixture(spec, seed, {3, 2});
  ASSERT_NE(f.model, nullptr);
  const float tiny = 1.0f / (1 << 24);
  const test::RefBag cancelling{{3, 7, 11, 19}, {1.0f, tiny, -1.0f, -tiny}};
  f.requests[0].user_bags[0] = cancelling;
  f.requests[1].candidates[1].bags[0] = cancelling;
  f.requests[0].candidates[2].bags[0] = cancelling;
  f.batch = test::MakeBatch(f.model, f.requests);
  auto layout = ComputeGpuLayout(*f.model);
  ASSERT_TRUE(layout.ok()) << layout.status();
  BatchPacker packer(MakePackInfo(*f.model), false);
  auto h = packer.Plan(f.batch);
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<unsigned char> buf(h->total_bytes);
  packer.Write(f.batch, *h, buf.data());
  const Emulated em = EmulateGpu(*f.model, *layout, buf, DeviceTables(*f.model, *layout), nullptr);
  ASSERT_NO_FATAL_FAILURE(ExpectPooledLikeTheCpuEngine(*f.model, *layout, f.batch, em));
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(em.user[layout->lookup[0].out_col + e], 0.0f) << "user_0 of request 0, col " << e;
  }
  int c = 0;
  for (size_t r = 0; r < f.requests.size(); ++r) {
    for (size_t i = 0; i < f.requests[r].candidates.size(); ++i, ++c) {
      const double want = test::ReferenceScore(f.test_model, f.requests[r], static_cast<int>(i));
      EXPECT_NEAR(em.scores[c], want, 1e-5) << "request " << r << " candidate " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GpuEmulationTest,
    ::testing::Values(EmulationCase{Interaction::kDot, DType::kF32, 8, true, false},
                      EmulationCase{Interaction::kDot, DType::kBF16, 4, false, false},
                      EmulationCase{Interaction::kDot, DType::kF16, 12, true, true},
                      EmulationCase{Interaction::kConcat, DType::kF32, 12, true, false},
                      EmulationCase{Interaction::kConcat, DType::kF16, 100, false, true},
                      EmulationCase{Interaction::kLinear, DType::kF32, 4, true, false},
                      EmulationCase{Interaction::kLinear, DType::kBF16, 128, false, false},
                      // int8: dims 16 and 128 take the kernel's vector path, 4/12/100 the
                      // element path; the reorder cases gather codes with scale and bias.
                      EmulationCase{Interaction::kDot, DType::kInt8, 16, true, false},
                      EmulationCase{Interaction::kDot, DType::kInt8, 12, false, true},
                      EmulationCase{Interaction::kConcat, DType::kInt8, 128, false, true},
                      EmulationCase{Interaction::kConcat, DType::kInt8, 4, true, false},
                      EmulationCase{Interaction::kLinear, DType::kInt8, 100, true, true}),
    [](const ::testing::TestParamInfo<EmulationCase>& info) {
      const EmulationCase& p = info.param;
      return std::string(InteractionName(p.interaction)) + "_" + std::string(DTypeName(p.dtype)) +
             "_dim" + std::to_string(p.dim) + (p.bottom ? "_bottom" : "_nobottom") +
             (p.reorder ? "_reorder" : "");
    });

}  // namespace
}  // namespace fuserank::engine::cuda
