#include "tests/e2e/reference_util.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fuserank::testing {
namespace {

using engine::Interaction;
using engine::ModelSpec;
using engine::TableSpec;
using Vec = std::vector<double>;

// y = W x + b with W [out, in] row-major; ReLU when asked.
Vec Linear(const TestModel& model, const std::string& name, const Vec& x, bool relu) {
  const std::vector<float>& w = model.weights.at(name + ".weight");
  const std::vector<float>& b = model.weights.at(name + ".bias");
  const size_t out = b.size();
  const size_t in = x.size();
  if (w.size() != out * in) {
    ADD_FAILURE() << name << ": reference input width " << in << " does not fit " << w.size();
    return Vec(out, 0.0);
  }
  Vec y(out);
  for (size_t o = 0; o < out; ++o) {
    double sum = b[o];
    for (size_t i = 0; i < in; ++i) sum += static_cast<double>(w[o * in + i]) * x[i];
    y[o] = relu ? std::max(0.0, sum) : sum;
  }
  return y;
}

// y = M x for a bias-free weight `name` [out, in].
Vec Times(const TestModel& model, const std::string& name, const Vec& x) {
  const std::vector<float>& w = model.weights.at(name);
  const size_t in = x.size(), out = w.size() / std::max<size_t>(in, 1);
  Vec y(out, 0.0);
  for (size_t o = 0; o < out; ++o) {
    for (size_t i = 0; i < in; ++i) y[o] += static_cast<double>(w[o * in + i]) * x[i];
  }
  return y;
}

// DCNv2: x_{l+1} = x0 * (U_l V_l x_l + b_l) + x_l, or with W_l for full rank.
Vec Cross(const TestModel& model, const Vec& x0) {
  Vec x = x0;
  for (int l = 0; l < model.spec.dcn.layers; ++l) {
    const std::string p = absl::StrCat("dcn.", l);
    Vec y = model.spec.dcn.low_rank > 0
                ? Times(model, p + ".U.weight", Times(model, p + ".V.weight", x))
                : Times(model, p + ".W.weight", x);
    const std::vector<float>& b = model.weights.at(p + ".bias");
    if (y.size() != x.size() || b.size() != x.size()) {
      ADD_FAILURE() << p << ": reference width " << x.size() << " does not fit";
      return x;
    }
    for (size_t i = 0; i < x.size(); ++i) x[i] = x0[i] * (y[i] + b[i]) + x[i];
  }
  return x;
}

int64_t Row(int64_t id, int64_t rows) {
  if (id >= 0 && id < rows) return id;
  return ((id % rows) + rows) % rows;
}

// The pooled vector of `table` from the feature of that name in `features` (zero if absent).
Vec Pool(const TestModel& model, const TableSpec& table,
         const google::protobuf::RepeatedPtrField<v1::Feature>& features) {
  Vec e(table.dim, 0.0);
  const std::vector<float>& rows =
      model.weights.at(absl::StrCat("embeddings.", table.name, ".weight"));
  for (const v1::Feature& feature : features) {
    if (feature.name() != table.name) continue;
    double weight_sum = 0;
    for (int i = 0; i < feature.ids_size(); ++i) {
      const double w = feature.weights_size() > 0 ? feature.weights(i) : 1.0;
      weight_sum += w;
      const int64_t row = Row(feature.ids(i), table.rows);
      for (int d = 0; d < table.dim; ++d) e[d] += w * rows[row * table.dim + d];
    }
    if (table.pooling == engine::Pooling::kMean) {
      for (double& v : e) v = weight_sum == 0 ? 0.0 : v / weight_sum;
    }
  }
  return e;
}

double Score(const TestModel& model, const v1::RankRequest& request, const v1::Candidate& c) {
  const ModelSpec& spec = model.spec;
  std::vector<Vec> v;  // V = [z, e_1, ..., e_T]
  if (spec.dense_total() > 0) {
    Vec x(request.user_dense().begin(), request.user_dense().end());
    x.insert(x.end(), c.dense().begin(), c.dense().end());
    for (size_t i = 0; i < spec.bottom_mlp.size(); ++i) {
      x = Linear(model, absl::StrCat("bottom_mlp.", i), x, /*relu=*/true);
    }
    v.push_back(x);
  }
  for (const TableSpec& table : spec.tables) {
    v.push_back(Pool(model, table,
                     table.side == engine::Side::kUser ? request.user_features() : c.features()));
  }
  Vec h;
  if (spec.interaction == Interaction::kDot) {
    if (spec.dense_total() > 0) h = v[0];
    for (size_t i = 1; i < v.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        double dot = 0;
        for (size_t d = 0; d < v[i].size(); ++d) dot += v[i][d] * v[j][d];
        h.push_back(dot);
      }
    }
  } else {
    for (const Vec& part : v) h.insert(h.end(), part.begin(), part.end());
    if (spec.interaction == Interaction::kLinear) h = Linear(model, "cross", h, /*relu=*/false);
    if (spec.interaction == Interaction::kDcn) h = Cross(model, h);
  }
  for (size_t i = 0; i < spec.top_mlp.size(); ++i) {
    h = Linear(model, absl::StrCat("top_mlp.", i), h, /*relu=*/i + 1 < spec.top_mlp.size());
  }
  return 1.0 / (1.0 + std::exp(-h[0]));
}

void AddRandomBag(const TableSpec& table, std::mt19937_64* rng,
                  google::protobuf::RepeatedPtrField<v1::Feature>* features) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  if (unit(*rng) > 0.8) return;
  v1::Feature* feature = features->Add();
  feature->set_name(table.name);
  const int n = std::uniform_int_distribution<int>(0, 4)(*rng);
  const bool weighted = unit(*rng) < 0.5;
  const bool wide = table.oov == engine::Oov::kModulo;
  std::uniform_int_distribution<int64_t> id(wide ? -2 * table.rows : 0,
                                            wide ? 3 * table.rows : table.rows - 1);
  for (int i = 0; i < n; ++i) {
    feature->add_ids(id(*rng));
    if (weighted) feature->add_weights(static_cast<float>(unit(*rng) * 3.0 - 1.0));
  }
}

}  // namespace

std::vector<double> ReferenceScores(const TestModel& model, const v1::RankRequest& request) {
  std::vector<double> scores;
  for (const v1::Candidate& candidate : request.candidates()) {
    scores.push_back(Score(model, request, candidate));
  }
  return scores;
}

v1::RankRequest RandomRequest(const TestModel& model, uint64_t seed, int max_candidates) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const ModelSpec& spec = model.spec;
  v1::RankRequest request;
  request.set_request_id(absl::StrCat("random-", seed));
  request.set_model(spec.name);
  for (const TableSpec& table : spec.tables) {
    if (table.side == engine::Side::kUser)
      AddRandomBag(table, &rng, request.mutable_user_features());
  }
  for (int i = 0; i < spec.dense_user; ++i) request.add_user_dense(normal(rng));
  const int n = std::uniform_int_distribution<int>(1, max_candidates)(rng);
  for (int c = 0; c < n; ++c) {
    v1::Candidate* candidate = request.add_candidates();
    // Unsigned arithmetic: a printed 64-bit seed times 1000 wraps instead of overflowing.
    candidate->set_item_id(static_cast<int64_t>(seed * 1000 + static_cast<uint64_t>(c)));
    for (const TableSpec& table : spec.tables) {
      if (table.side == engine::Side::kItem)
        AddRandomBag(table, &rng, candidate->mutable_features());
    }
    for (int i = 0; i < spec.dense_item; ++i) candidate->add_dense(normal(rng));
  }
  const int choice = std::uniform_int_distribution<int>(0, 3)(rng);
  request.set_top_k(choice == 0   ? 0
                    : choice == 1 ? n + 3
                                  : std::uniform_int_distribution<int>(1, n)(rng));
  return request;
}

void AddFeature(google::protobuf::RepeatedPtrField<v1::Feature>* features, const std::string& name,
                std::vector<int64_t> ids, std::vector<float> weights) {
  v1::Feature* feature = features->Add();
  feature->set_name(name);
  for (int64_t id : ids) feature->add_ids(id);
  for (float w : weights) feature->add_weights(w);
}

}  // namespace fuserank::testing
