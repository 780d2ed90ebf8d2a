#include "tests/engine/cpu/cpu_reference_util.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fuserank::engine::test {
namespace {

using fuserank::testing::TestModel;

int64_t SpecRow(int64_t id, int64_t rows) {
  if (id >= 0 && id < rows) return id;
  return ((id % rows) + rows) % rows;
}

std::vector<double> Pool(const TestModel& model, const TableSpec& table, const RefBag& bag) {
  const std::vector<float>& e =
      model.weights.at(absl::StrCat("embeddings.", table.name, ".weight"));
  std::vector<double> v(table.dim, 0.0);
  double weight_sum = 0;
  for (size_t k = 0; k < bag.ids.size(); ++k) {
    const int64_t row = SpecRow(bag.ids[k], table.rows);
    const double w = bag.weights.empty() ? 1.0 : bag.weights[k];
    for (int j = 0; j < table.dim; ++j) v[j] += w * e[row * table.dim + j];
    weight_sum += w;
  }
  if (table.pooling == Pooling::kMean) {
    for (double& x : v) x = weight_sum == 0 ? 0.0 : x / weight_sum;
  }
  return v;
}

// y = W x + b (W [out, in] row-major), ReLU when asked; empty on a shape mismatch.
std::vector<double> Dense(const TestModel& model, const std::string& prefix,
                          const std::vector<double>& x, bool relu) {
  const std::vector<float>& w = model.weights.at(prefix + ".weight");
  const std::vector<float>& b = model.weights.at(prefix + ".bias");
  const size_t out = b.size();
  if (w.size() != out * x.size()) return {};
  std::vector<double> y(out);
  for (size_t o = 0; o < out; ++o) {
    double sum = b[o];
    for (size_t i = 0; i < x.size(); ++i) sum += static_cast<double>(w[o * x.size() + i]) * x[i];
    y[o] = relu && sum < 0 ? 0.0 : sum;
  }
  return y;
}

// x_{l+1} = x0 * (U_l V_l x_l + b_l) + x_l (W_l x_l with full rank); empty on a mismatch.
std::vector<double> Cross(const TestModel& model, const std::vector<double>& x0) {
  const size_t d = x0.size();
  const size_t rank = static_cast<size_t>(model.spec.dcn.low_rank);
  std::vector<double> x = x0;
  for (int l = 0; l < model.spec.dcn.layers; ++l) {
    const std::string p = absl::StrCat("dcn.", l);
    const std::vector<float>& b = model.weights.at(p + ".bias");
    std::vector<double> y(d, 0.0);
    if (rank > 0) {
      const std::vector<float>& v = model.weights.at(p + ".V.weight");  // [R, d]
      const std::vector<float>& u = model.weights.at(p + ".U.weight");  // [d, R]
      if (v.size() != rank * d || u.size() != d * rank) return {};
      std::vector<double> t(rank, 0.0);
      for (size_t r = 0; r < rank; ++r) {
        for (size_t i = 0; i < d; ++i) t[r] += static_cast<double>(v[r * d + i]) * x[i];
      }
      for (size_t i = 0; i < d; ++i) {
        for (size_t r = 0; r < rank; ++r) y[i] += static_cast<double>(u[i * rank + r]) * t[r];
      }
    } else {
      const std::vector<float>& w = model.weights.at(p + ".W.weight");  // [d, d]
      if (w.size() != d * d) return {};
      for (size_t o = 0; o < d; ++o) {
        for (size_t i = 0; i < d; ++i) y[o] += static_cast<double>(w[o * d + i]) * x[i];
      }
    }
    if (b.size() != d) return {};
    for (size_t i = 0; i < d; ++i) x[i] = x0[i] * (y[i] + b[i]) + x[i];
  }
  return x;
}

}  // namespace

double ReferenceScore(const TestModel& model, const RefRequest& request, int c) {
  const ModelSpec& spec = model.spec;
  const RefCandidate& candidate = request.candidates[c];
  std::vector<std::vector<double>> v;  // V = [z, e_1 .. e_T]
  std::vector<double> x(request.user_dense.begin(), request.user_dense.end());
  x.insert(x.end(), candidate.dense.begin(), candidate.dense.end());
  if (!x.empty()) {
    for (size_t l = 0; l < spec.bottom_mlp.size(); ++l) {
      x = Dense(model, absl::StrCat("bottom_mlp.", l), x, /*relu=*/true);
    }
    v.push_back(x);
  }
  const bool has_z = !v.empty();
  size_t u = 0, i = 0;
  for (const TableSpec& table : spec.tables) {
    v.push_back(Pool(model, table,
                     table.side == Side::kUser ? request.user_bags[u++] : candidate.bags[i++]));
  }
  std::vector<double> concat;
  for (const auto& vec : v) concat.insert(concat.end(), vec.begin(), vec.end());
  std::vector<double> h;
  switch (spec.interaction) {
    case Interaction::kConcat:
      h = concat;
      break;
    case Interaction::kLinear:
      h = Dense(model, "cross", concat, /*relu=*/false);
      break;
    case Interaction::kDcn:
      h = Cross(model, concat);
      if (h.empty()) return NAN;
      break;
    case Interaction::kDot:
      if (has_z) h = v[0];
      for (size_t a = 1; a < v.size(); ++a) {
        for (size_t b = 0; b < a; ++b) {
          if (v[a].size() != v[b].size()) return NAN;
          double dot = 0;
          for (size_t j = 0; j < v[a].size(); ++j) dot += v[a][j] * v[b][j];
          h.push_back(dot);
        }
      }
      break;
  }
  for (size_t l = 0; l < spec.top_mlp.size(); ++l) {
    h = Dense(model, absl::StrCat("top_mlp.", l), h, /*relu=*/l + 1 < spec.top_mlp.size());
  }
  if (h.size() != 1) return NAN;
  return 1.0 / (1.0 + std::exp(-h[0]));
}

namespace {

void AppendBag(const RefBag& bag, int64_t rows, BagSet* set) {
  for (size_t k = 0; k < bag.ids.size(); ++k) {
    set->rows.push_back(static_cast<int32_t>(SpecRow(bag.ids[k], rows)));
    set->weights.push_back(bag.weights.empty() ? 1.0f : bag.weights[k]);
  }
  set->bag_begin.push_back(static_cast<uint32_t>(set->rows.size()));
}

}  // namespace

Batch MakeBatch(std::shared_ptr<const Model> model, const std::vector<RefRequest>& requests) {
  Batch batch;
  const ModelSpec& spec = model->spec();
  for (const RefRequest& request : requests) {
    const uint32_t count = static_cast<uint32_t>(request.candidates.size());
    batch.candidate_begin.push_back(batch.candidate_begin.back() + count);
    batch.top_k.push_back(request.top_k == 0 || request.top_k > count ? count : request.top_k);
    for (size_t u = 0; u < model->user_tables().size(); ++u) {
      AppendBag(request.user_bags[u], spec.tables[model->user_tables()[u]].rows, &batch.user);
    }
    batch.user_dense.insert(batch.user_dense.end(), request.user_dense.begin(),
                            request.user_dense.end());
    for (const RefCandidate& candidate : request.candidates) {
      for (size_t i = 0; i < model->item_tables().size(); ++i) {
        AppendBag(candidate.bags[i], spec.tables[model->item_tables()[i]].rows, &batch.item);
      }
      batch.item_dense.insert(batch.item_dense.end(), candidate.dense.begin(),
                              candidate.dense.end());
    }
  }
  batch.model = std::move(model);
  return batch;
}

namespace {

RefBag RandomBag(const TableSpec& table, const RequestShape& shape, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> size_dist(0, shape.max_bag), coin(0, 9);
  std::uniform_int_distribution<int64_t> row(0, table.rows - 1);
  std::uniform_real_distribution<float> weight(0.125f, 2.0f);
  RefBag bag;
  const int size = size_dist(rng);
  for (int k = 0; k < size; ++k) {
    int64_t id = row(rng);
    const int pick = coin(rng);
    if (k > 0 && pick == 0) id = bag.ids[0];  // repeated id
    if (shape.out_of_range && table.oov == Oov::kModulo && pick >= 8) {
      const int64_t far[] = {-1,
                             table.rows,
                             -table.rows * 7 - 3,
                             table.rows * 1000 + 5,
                             std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max()};
      id = far[row(rng) % 6];
    }
    bag.ids.push_back(id);
  }
  if (shape.weights && size > 0 && coin(rng) < 5) {
    for (int k = 0; k < size; ++k) bag.weights.push_back(weight(rng));
    if (size >= 2 && coin(rng) == 0) {  // weights that sum to exactly zero
      for (int k = 0; k + 1 < size; ++k) bag.weights[k] = 0.25f;
      bag.weights[size - 1] = -0.25f * (size - 1);
    }
  }
  return bag;
}

std::vector<float> RandomDense(int n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> dense(n);
  for (float& x : dense) x = dist(rng);
  return dense;
}

}  // namespace

RefRequest RandomRequest(const ModelSpec& spec, const RequestShape& shape, std::mt19937_64& rng) {
  RefRequest request;
  for (const TableSpec& table : spec.tables) {
    if (table.side == Side::kUser) request.user_bags.push_back(RandomBag(table, shape, rng));
  }
  request.user_dense = RandomDense(spec.dense_user, rng);
  for (int c = 0; c < shape.candidates; ++c) {
    RefCandidate candidate;
    for (const TableSpec& table : spec.tables) {
      if (table.side == Side::kItem) candidate.bags.push_back(RandomBag(table, shape, rng));
    }
    candidate.dense = RandomDense(spec.dense_item, rng);
    request.candidates.push_back(std::move(candidate));
  }
  return request;
}

BatchFixture MakeBatchFixture(ModelSpec spec, uint64_t seed, const std::vector<int>& candidates) {
  BatchFixture f;
  f.test_model = fuserank::testing::MakeRandomModel(spec, seed);
  auto model = fuserank::testing::BuildTestModel(f.test_model);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return f;
  f.model = *model;
  std::mt19937_64 rng(seed);
  for (int n : candidates) {
    RequestShape shape;
    shape.candidates = n;
    f.requests.push_back(RandomRequest(spec, shape, rng));
    f.requests.back().top_k = static_cast<uint32_t>(rng() % (n + 2));
  }
  f.batch = MakeBatch(f.model, f.requests);
  return f;
}

}  // namespace fuserank::engine::test
