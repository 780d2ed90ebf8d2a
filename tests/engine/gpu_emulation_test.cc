// The CUDA backend's data path emulated on the host, from the packed batch and the
// GpuLayout alone (the addresses the kernels read and write; not their thread mapping),
// against the independent double reference: catches a wrong column, pitch, slot or
// section offset without a GPU. Dot / concat / linear, fp32 / fp16 / bf16, dims 4 to
// 128, with and without a bottom MLP, id reorder on and off.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_dtype.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/gpu_layout.h"
#include "gtest/gtest.h"
#include "kernels/batch_layout.h"
#include "kernels/layout_math.h"
#include "kernels/topk_keys.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/testing/test_model.h"
#include "tests/testing/test_seed.h"

namespace fuserank::engine::cuda {
namespace {

using kernels::PackedHeader;
using kernels::Section;

using Fixture = test::BatchFixture;
constexpr auto MakeFixture = test::MakeBatchFixture;

float RowElement(const EmbeddingTable& t, int32_t row, int e) {
  const std::byte* p = t.data + static_cast<size_t>(row) * t.row_bytes;
  uint16_t bits;
  switch (t.dtype) {
    case DType::kF16:
      std::memcpy(&bits, p + 2 * e, 2);
      return HalfToFloat(bits);
    case DType::kBF16:
      std::memcpy(&bits, p + 2 * e, 2);
      return BFloat16ToFloat(bits);
    default: {
      float f;
      std::memcpy(&f, p + 4 * e, 4);
      return f;
    }
  }
}

void Dense(const DenseLayer& l, const float* in, float* out) {
  for (int o = 0; o < l.out; ++o) {
    double acc = l.bias[o];
    for (int i = 0; i < l.in; ++i) acc += double{l.weight[size_t{1} * o * l.in + i]} * in[i];
    out[o] = static_cast<float>(l.relu && acc < 0 ? 0.0 : acc);
  }
}

// Scores of every candidate, computed the way the kernels address memory: bags and
// dense rows from the packed sections, pooled vectors at GpuLayout columns, h built by
// the slot lists, the MLP with the layout's pitches.
std::vector<float> EmulateGpuScores(const Model& m, const GpuLayout& g,
                                    const std::vector<unsigned char>& buf) {
  PackedHeader h;
  std::memcpy(&h, buf.data(), sizeof(h));
  const unsigned char* base = buf.data();
  const uint32_t n = h.num_candidates;
  std::vector<float> x(size_t{n} * std::max(g.x_ld, 1), NAN);
  std::vector<float> hbuf(size_t{n} * g.h_ld, NAN);
  std::vector<float> user(size_t{h.num_requests} * g.user_ld, NAN);
  std::vector<float> item(size_t{n} * g.item_ld, NAN);
  const bool dot = g.interaction == Interaction::kDot;
  auto pool = [&](uint32_t bag, uint32_t begin_off, uint32_t rows_off, uint32_t weights_off,
                  const kernels::LookupTable& d, int spec_index, float* out) {
    const EmbeddingTable& t = m.tables()[spec_index];
    const uint32_t* begin = Section<uint32_t>(base, begin_off);
    const int32_t* rows = Section<int32_t>(base, rows_off);
    const float* weights = h.has_weights ? Section<float>(base, weights_off) : nullptr;
    for (int e = 0; e < d.dim; ++e) {
      float acc = 0, wsum = 0;
      for (uint32_t j = begin[bag]; j < begin[bag + 1]; ++j) {
        const float w = weights ? weights[j] : 1.0f;
        acc += w * RowElement(t, rows[j], e);
        wsum += w;
      }
      out[d.out_col + e] = d.mean ? (wsum != 0 ? acc / wsum : 0.0f) : acc;
    }
  };
  for (uint32_t b = 0; b < h.num_item_bags; ++b) {
    const int k = g.user_tables + static_cast<int>(b % g.item_tables);
    float* out = (dot ? item.data() + size_t{b / g.item_tables} * g.item_ld
                      : hbuf.data() + size_t{b / g.item_tables} * g.h_ld);
    pool(b, h.item_bag_begin, h.item_rows, h.item_weights, g.lookup[k], g.lookup_spec_index[k],
         out);
  }
  for (uint32_t b = 0; b < h.num_user_bags; ++b) {
    const int k = static_cast<int>(b % g.user_tables);
    pool(b, h.user_bag_begin, h.user_rows, h.user_weights, g.lookup[k], g.lookup_spec_index[k],
         user.data() + size_t{b / g.user_tables} * g.user_ld);
  }
  const uint32_t* cb = Section<uint32_t>(base, h.candidate_begin);
  std::vector<float> tmp(g.hidden_ld), tmp2(g.hidden_ld);
  std::vector<float> scores(n);
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
  return scores;
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
  std::mt19937_64 rng(seed);
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
  Fixture f = MakeFixture(spec, seed, {1, 7, 0, 12});
  ASSERT_NE(f.model, nullptr);
  auto layout = ComputeGpuLayout(*f.model);
  ASSERT_TRUE(layout.ok()) << layout.status();
  BatchPacker packer(MakePackInfo(*f.model), p.reorder);
  auto h = packer.Plan(f.batch);
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<unsigned char> buf(h->total_bytes);
  packer.Write(f.batch, *h, buf.data());
  if (p.reorder) {
    // Resolve slots back to rows the way the gather pass does.
    auto resolve = [&](uint32_t off, size_t count) {
      int32_t* rows = kernels::MutableSection<int32_t>(buf.data(), off);
      for (size_t j = 0; j < count; ++j) rows[j] = packer.unique_rows()[rows[j]].row;
    };
    resolve(h->user_rows, f.batch.user.rows.size());
    resolve(h->item_rows, f.batch.item.rows.size());
  }
  const std::vector<float> scores = EmulateGpuScores(*f.model, *layout, buf);
  int c = 0;
  for (size_t r = 0; r < f.requests.size(); ++r) {
    for (size_t i = 0; i < f.requests[r].candidates.size(); ++i, ++c) {
      const double want = test::ReferenceScore(f.test_model, f.requests[r], static_cast<int>(i));
      EXPECT_NEAR(scores[c], want, 1e-5) << "request " << r << " candidate " << i;
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
                      EmulationCase{Interaction::kLinear, DType::kBF16, 128, false, false}),
    [](const ::testing::TestParamInfo<EmulationCase>& info) {
      const EmulationCase& p = info.param;
      return std::string(InteractionName(p.interaction)) + "_" + std::string(DTypeName(p.dtype)) +
             "_dim" + std::to_string(p.dim) + (p.bottom ? "_bottom" : "_nobottom") +
             (p.reorder ? "_reorder" : "");
    });

}  // namespace
}  // namespace fuserank::engine::cuda
