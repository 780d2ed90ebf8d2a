#include "engine/hot_rows/sampling_backend.h"

#include <utility>

namespace fuserank::engine {
namespace {

// Every bag of `bags`: bag b is of table order[b % order.size()] (bags are laid out per
// request or candidate, one per table of the side, in the model's order).
void ObserveBags(const BagSet& bags, const std::vector<int>& order, AccessSampler* sampler) {
  if (order.empty()) return;
  size_t table = 0;  // b % order.size(), without a division per bag
  for (size_t b = 0; b + 1 < bags.bag_begin.size(); ++b) {
    const uint32_t begin = bags.bag_begin[b];
    const uint32_t end = bags.bag_begin[b + 1];
    if (end > begin) {
      sampler->ObserveRows(order[table],
                           absl::MakeConstSpan(bags.rows.data() + begin, end - begin));
    }
    if (++table == order.size()) table = 0;
  }
}

}  // namespace

SamplingBackend::SamplingBackend(std::unique_ptr<Backend> inner, HotRowManager* manager)
    : inner_(std::move(inner)) {
  for (int w = 0; w < inner_->num_workers(); ++w) {
    samplers_.push_back(
        std::make_unique<AccessSampler>(manager, 4096, /*seed=*/static_cast<uint64_t>(w) + 1));
  }
}

absl::Status SamplingBackend::Run(int worker, const Batch& batch, BatchResult* result) {
  absl::Status status = inner_->Run(worker, batch, result);
  if (status.ok()) Observe(worker, batch);
  return status;
}

void SamplingBackend::Observe(int worker, const Batch& batch) {
  if (worker < 0 || worker >= static_cast<int>(samplers_.size()) || batch.model == nullptr) {
    return;
  }
  AccessSampler* sampler = samplers_[worker].get();
  ObserveBags(batch.user, batch.model->user_tables(), sampler);
  ObserveBags(batch.item, batch.model->item_tables(), sampler);
  sampler->Flush();
}

}  // namespace fuserank::engine
