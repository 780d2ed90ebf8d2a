// The fused lookup kernel (and its id-reorder gather pass) against the CPU engine's
// PooledLookup, table by table, on seeded random batches: fp32/fp16/bf16/int8 (row-wise
// scale and bias), dims 4, 12, 100 and 128 (int8 also 16; vector and element paths),
// sum/mean, with and without weights, empty bags and repeated ids, 1 and 4096+ candidates
// over several requests, one-hot batches, every lane-group size, with and without the id
// prefetch (which must give the same bits).
// Outputs are poisoned first; columns no table owns must stay poisoned.
#include "kernels/lookup.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_lookup.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/device_model.h"
#include "engine/cuda/gpu_layout.h"
#include "gtest/gtest.h"
#include "kernels/layout_math.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/engine/cpu/cpu_test_models_util.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

// kMisaligned: every output row starts one float past a 16-byte boundary, so the vector
// path must take its scalar-store fallback.
enum class Mode { kUnweighted, kWeighted, kReorder, kMisaligned };

struct LookupCase {
  DType dtype;
  int dim;
  Mode mode;
};

std::string CaseName(const ::testing::TestParamInfo<LookupCase>& info) {
  const char* modes[] = {"unweighted", "weighted", "reorder", "misaligned"};
  return std::string(DTypeName(info.param.dtype)) + "_dim" + std::to_string(info.param.dim) + "_" +
         modes[static_cast<int>(info.param.mode)];
}

class LookupKernelTest : public ::testing::TestWithParam<LookupCase> {};

// Compares `rows` rows of a pooled block (ld floats each) with the reference: the columns
// of each listed table within tolerance, every other column still poisoned.
void ExpectBlock(const std::vector<float>& got, const std::vector<float>& want, uint32_t rows,
                 int ld, const std::vector<std::pair<int, int>>& col_dim, const std::string& what) {
  std::vector<bool> owned(ld, false);
  for (auto [col, dim] : col_dim) {
    for (int e = 0; e < dim; ++e) owned[col + e] = true;
  }
  for (uint32_t r = 0; r < rows; ++r) {
    for (int e = 0; e < ld; ++e) {
      const float g = got[size_t{r} * ld + e];
      const float w = want[size_t{r} * ld + e];
      if (!owned[e]) {
        ASSERT_TRUE(gpu_test::IsPoison(g)) << what << ": row " << r << " col " << e << " written";
        continue;
      }
      ASSERT_NEAR(g, w, 1e-5 * std::max(1.0f, std::fabs(w)))
          << what << ": row " << r << " col " << e;
    }
  }
}

TEST_P(LookupKernelTest, MatchesTheCpuPooledLookup) {
  FUSERANK_SKIP_WITHOUT_GPU();
  const LookupCase p = GetParam();
  const uint64_t seed = fuserank::testing::TestSeed();
  SCOPED_TRACE(fuserank::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  ModelSpec spec = fuserank::testing::SmallSpec(2, 3, 1000, p.dim);
  spec.embedding_dtype = p.dtype;
  spec.tables[1].pooling = Pooling::kMean;
  spec.tables[4].pooling = Pooling::kMean;
  std::swap(spec.tables[1], spec.tables[2]);  // user, item, user, item, item
  // int8: codes with a drawn (scale, bias) per row; else the test model's values as stored.
  fuserank::testing::TestModel test_model;
  auto model_or =
      p.dtype == DType::kInt8
          ? engine::test::BuildVariantModel(spec, seed, rng, &test_model)
          : fuserank::testing::BuildTestModel(fuserank::testing::MakeRandomModel(spec, seed));
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  std::shared_ptr<const Model> model = *model_or;
  auto layout_or = ComputeGpuLayout(*model);
  ASSERT_TRUE(layout_or.ok()) << layout_or.status();
  const GpuLayout& g = *layout_or;
  ASSERT_EQ(g.row_type, RowTypeOf(p.dtype));
  auto dm = DeviceModel::Upload(*model, g);
  ASSERT_TRUE(dm.ok()) << dm.status();

  // Bags of 0-9 ids (past the kernel's 4-row unroll, with a tail), and of 0 or 1 (the
  // one-hot batches the lane group's first-rows-together pass is for).
  struct Sizes {
    std::vector<int> candidates;
    int max_bag;
  };
  for (const Sizes& sizes : {Sizes{{1}, 9}, Sizes{{4096, 3, 0, 17}, 9}, Sizes{{700, 5}, 1}}) {
    std::vector<test::RefRequest> requests;
    for (int n : sizes.candidates) {
      engine::test::RequestShape shape;
      shape.candidates = n;
      shape.max_bag = sizes.max_bag;
      shape.weights = p.mode != Mode::kUnweighted;
      requests.push_back(engine::test::RandomRequest(spec, shape, rng));
    }
    const Batch batch = engine::test::MakeBatch(model, requests);
    BatchPacker packer(MakePackInfo(*model), p.mode == Mode::kReorder);
    auto h = packer.Plan(batch);
    ASSERT_TRUE(h.ok()) << h.status();
    std::vector<unsigned char> packed(h->total_bytes);
    packer.Write(batch, *h, packed.data());
    DeviceBuffer d_batch = gpu_test::Upload(packed);
    const uint32_t n = h->num_candidates;
    const uint32_t r = h->num_requests;
    const uint32_t bucket = kernels::CandidateBucket(std::max(n, r));

    // The CPU engine's stage, table by table, into the same block layout.
    std::vector<float> want_user(size_t{r} * g.user_ld, 0.0f);
    std::vector<float> want_item(size_t{n} * g.item_ld, 0.0f);
    std::vector<std::pair<int, int>> user_cols, item_cols;
    for (int u = 0; u < g.user_tables; ++u) {
      const EmbeddingTable& t = model->tables()[g.lookup_spec_index[u]];
      PooledLookup(t, batch.user, u, g.user_tables, r, want_user.data() + g.lookup[u].out_col,
                   g.user_ld);
      user_cols.push_back({g.lookup[u].out_col, t.dim});
    }
    for (int i = 0; i < g.item_tables; ++i) {
      const int k = g.user_tables + i;
      const EmbeddingTable& t = model->tables()[g.lookup_spec_index[k]];
      PooledLookup(t, batch.item, i, g.item_tables, n, want_item.data() + g.lookup[k].out_col,
                   g.item_ld);
      item_cols.push_back({g.lookup[k].out_col, t.dim});
    }
    const int dense = g.dense_user + g.dense_item;
    std::vector<float> want_x(size_t{n} * g.x_ld, 0.0f);
    for (uint32_t req = 0; req < r; ++req) {
      for (uint32_t c = batch.candidate_begin[req]; c < batch.candidate_begin[req + 1]; ++c) {
        for (int e = 0; e < g.dense_user; ++e) {
          want_x[size_t{c} * g.x_ld + e] = batch.user_dense[size_t{req} * g.dense_user + e];
        }
        for (int e = 0; e < g.dense_item; ++e) {
          want_x[size_t{c} * g.x_ld + g.dense_user + e] =
              batch.item_dense[size_t{c} * g.dense_item + e];
        }
      }
    }

    DeviceBuffer gathered;
    if (p.mode == Mode::kReorder) {
      gathered = gpu_test::Poisoned(size_t{h->num_unique} * g.gather_stride + 16);
      kernels::GatherArgs ga;
      ga.d_batch = d_batch.get<unsigned char>();
      ga.d_tables = (*dm)->d_tables();
      ga.d_gathered = gathered.get<unsigned char>();
      ga.stride = g.gather_stride;
      ga.max_unique = h->num_unique;
      ASSERT_EQ(kernels::LaunchGatherUniqueRows(ga, nullptr), cudaSuccess);
    }
    // Misaligned: the blocks start one float into their buffers (ld stays a multiple of 4,
    // so every row's vectors are 4 bytes off a 16-byte boundary); that float stays poisoned.
    const size_t shift = p.mode == Mode::kMisaligned ? 1 : 0;
    auto download = [&](const DeviceBuffer& d, size_t n_floats, const char* what) {
      std::vector<float> v = gpu_test::Download<float>(d, n_floats + shift);
      if (shift != 0) {
        EXPECT_TRUE(gpu_test::IsPoison(v[0])) << what << ": written before the block";
        v.erase(v.begin());
      }
      return v;
    };
    std::vector<float> plain_user, plain_item;  // the last blocks without id prefetch
    for (auto [lanes, prefetch] :
         {std::pair{4, false}, std::pair{4, true}, std::pair{8, false}, std::pair{8, true},
          std::pair{16, false}, std::pair{16, true}, std::pair{32, false}, std::pair{32, true}}) {
      SCOPED_TRACE(::testing::Message()
                   << "lanes " << lanes << ", prefetch_ids " << prefetch << ", candidates " << n);
      DeviceBuffer d_user = gpu_test::Poisoned((want_user.size() + shift) * sizeof(float));
      DeviceBuffer d_item = gpu_test::Poisoned((want_item.size() + shift) * sizeof(float));
      DeviceBuffer d_x = gpu_test::Poisoned(want_x.size() * sizeof(float));
      kernels::LookupArgs a;
      a.d_batch = d_batch.get<unsigned char>();
      a.d_tables = (*dm)->d_tables();
      a.user_tables = g.user_tables;
      a.item_tables = g.item_tables;
      a.d_user_out = d_user.get<float>() + shift;
      a.user_ld = g.user_ld;
      a.d_item_out = d_item.get<float>() + shift;
      a.item_ld = g.item_ld;
      a.d_dense_out = d_x.get<float>();
      a.dense_ld = g.x_ld;
      a.dense_user = g.dense_user;
      a.dense_item = g.dense_item;
      if (p.mode == Mode::kReorder) {
        a.d_gathered = gathered.get<unsigned char>();
        a.gather_stride = g.gather_stride;
      }
      a.max_candidates = bucket;
      a.max_requests = bucket;
      a.lanes = lanes;
      a.prefetch_ids = prefetch;
      a.row_type = g.row_type;
      ASSERT_EQ(kernels::LaunchPooledLookup(a, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<float> got_user = download(d_user, want_user.size(), "user block");
      std::vector<float> got_item = download(d_item, want_item.size(), "item block");
      ExpectBlock(got_user, want_user, r, g.user_ld, user_cols, "user block");
      ExpectBlock(got_item, want_item, n, g.item_ld, item_cols, "item block");
      ExpectBlock(gpu_test::Download<float>(d_x, want_x.size()), want_x, n, g.x_ld, {{0, dense}},
                  "dense rows");
      if (HasFatalFailure()) return;
      // With and without the id prefetch, every pooled value is summed the same way.
      if (!prefetch) {
        plain_user = std::move(got_user);
        plain_item = std::move(got_item);
      } else {
        ASSERT_EQ(std::memcmp(got_user.data(), plain_user.data(), got_user.size() * sizeof(float)),
                  0)
            << "user block: not the bits of the lookup without id prefetch";
        ASSERT_EQ(std::memcmp(got_item.data(), plain_item.data(), got_item.size() * sizeof(float)),
                  0)
            << "item block: not the bits of the lookup without id prefetch";
      }
    }
  }
}

std::vector<LookupCase> AllCases() {
  std::vector<LookupCase> cases;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int dim : {4, 12, 100, 128}) {
      for (Mode mode : {Mode::kUnweighted, Mode::kWeighted, Mode::kReorder}) {
        cases.push_back({dtype, dim, mode});
      }
    }
  }
  // int8: dims 16 and 128 read 16-byte vectors of codes, the others element by element;
  // every row carries its scale and bias (reorder: gathered with them).
  for (int dim : {4, 12, 16, 100, 128}) {
    for (Mode mode : {Mode::kUnweighted, Mode::kWeighted, Mode::kReorder}) {
      cases.push_back({DType::kInt8, dim, mode});
    }
  }
  // The vector path (fp32 dim % 4 == 0, fp16 dim % 8 == 0, int8 dim % 16 == 0) into
  // unaligned output rows.
  for (DType dtype : {DType::kF32, DType::kF16}) {
    for (int dim : {8, 128}) cases.push_back({dtype, dim, Mode::kMisaligned});
  }
  for (int dim : {16, 128}) cases.push_back({DType::kInt8, dim, Mode::kMisaligned});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Tables, LookupKernelTest, ::testing::ValuesIn(AllCases()), CaseName);

TEST(LookupLaunchTest, EmptyLaunchReturnsAtOnce) {
  kernels::LookupArgs a;  // max_candidates == 0: no device call at all
  EXPECT_EQ(kernels::LaunchPooledLookup(a, nullptr), cudaSuccess);
  kernels::GatherArgs ga;
  EXPECT_EQ(kernels::LaunchGatherUniqueRows(ga, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace fuserank::engine::cuda
