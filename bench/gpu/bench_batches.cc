#include "bench/gpu/bench_batches.h"

#include <algorithm>

namespace fuserank::bench {

engine::Batch OneRequestBatch(const std::shared_ptr<const engine::Model>& model, uint32_t n,
                              std::mt19937_64& rng, const RowLaw& row) {
  engine::Batch b;
  b.model = model;
  b.candidate_begin = {0, n};
  b.top_k = {std::min<uint32_t>(n, 100)};
  std::uniform_real_distribution<float> u(-1, 1);
  auto bag = [&](engine::BagSet* bags, int table) {
    bags->rows.push_back(row(table, rng));
    bags->weights.push_back(1.0f);
    bags->bag_begin.push_back(static_cast<uint32_t>(bags->rows.size()));
  };
  for (int s : model->user_tables()) bag(&b.user, s);
  for (uint32_t c = 0; c < n; ++c) {
    for (int s : model->item_tables()) bag(&b.item, s);
  }
  for (int i = 0; i < model->spec().dense_user; ++i) b.user_dense.push_back(u(rng));
  for (uint32_t i = 0; i < n * model->spec().dense_item; ++i) b.item_dense.push_back(u(rng));
  return b;
}

}  // namespace fuserank::bench
