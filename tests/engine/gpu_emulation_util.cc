#include "tests/engine/gpu_emulation_util.h"

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

namespace fuserank::engine::cuda::emulation {

using kernels::PackedHeader;
using kernels::Section;

namespace {

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

}  // namespace

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

namespace {

void Dense(const DenseLayer& l, const float* in, float* out) {
  for (int o = 0; o < l.out; ++o) {
    double acc = l.bias[o];
    for (int i = 0; i < l.in; ++i) acc += double{l.weight[size_t{1} * o * l.in + i]} * in[i];
    out[o] = static_cast<float>(l.relu && acc < 0 ? 0.0 : acc);
  }
}

}  // namespace

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
  if (spec.embedding_dtype != DType::kInt8) return test::MakeBatchFixture(spec, seed, sizes);
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

}  // namespace fuserank::engine::cuda::emulation
