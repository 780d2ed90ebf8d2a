#include "engine/cuda/batch_packer.h"

#include <algorithm>
#include <cstring>

#include "engine/check.h"

namespace fuserank::engine::cuda {
namespace {

template <typename T>
void Put(void* dst, uint32_t offset, const std::vector<T>& v) {
  if (!v.empty()) {
    std::memcpy(static_cast<unsigned char*>(dst) + offset, v.data(), v.size() * sizeof(T));
  }
}

bool AllOnes(const std::vector<float>& w) {
  return std::all_of(w.begin(), w.end(), [](float x) { return x == 1.0f; });
}

// Adds each bag's id count to ids[table] (table: b % tables). The bag layout is
// ValidateBatch()'s (engine/batch_validation.h); only its sizes are checked again here.
void CountIds(const BagSet& bags, uint32_t owners, size_t tables, const char* side, uint64_t* ids) {
  FUSERANK_CHECK(bags.bag_begin.size() == size_t{owners} * tables + 1 &&
                 bags.bag_begin.back() == bags.rows.size() &&
                 bags.weights.size() == bags.rows.size())
      << "batch packer: " << side << " bags do not match (the batch was not validated)";
  size_t table = 0;  // b % tables, without a division per bag
  for (size_t b = 0; b < bags.num_bags(); ++b) {
    ids[table] += bags.bag_begin[b + 1] - bags.bag_begin[b];
    if (++table == tables) table = 0;
  }
}

// Zeroes, in the packed weights `w` of one side, the weights of every mean-pooled bag whose
// weights add up to exactly 0 in double (the CPU engine's sum, cpu_lookup.cc).
void ZeroCancellingMeanBags(const BagSet& bags, const std::vector<bool>& mean, float* w) {
  if (std::find(mean.begin(), mean.end(), true) == mean.end()) return;
  size_t table = 0;
  for (size_t b = 0; b < bags.num_bags(); ++b) {
    const uint32_t first = bags.bag_begin[b];
    const uint32_t end = bags.bag_begin[b + 1];
    if (mean[table] && end > first) {
      double sum = 0.0;
      for (uint32_t j = first; j < end; ++j) sum += bags.weights[j];
      if (sum == 0.0) std::fill(w + first, w + end, 0.0f);
    }
    if (++table == mean.size()) table = 0;
  }
}

}  // namespace

PackInfo MakePackInfo(const Model& model) {
  PackInfo info;
  info.dense_user = static_cast<uint32_t>(model.spec().dense_user);
  info.dense_item = static_cast<uint32_t>(model.spec().dense_item);
  for (int s : model.user_tables()) info.user_rows.push_back(model.tables()[s].rows);
  for (int s : model.item_tables()) info.item_rows.push_back(model.tables()[s].rows);
  for (int s : model.user_tables()) {
    info.user_mean.push_back(model.tables()[s].pooling == Pooling::kMean);
  }
  for (int s : model.item_tables()) {
    info.item_mean.push_back(model.tables()[s].pooling == Pooling::kMean);
  }
  return info;
}

absl::StatusOr<kernels::PackedHeader> BatchPacker::Plan(const Batch& batch) {
  // The batch passed ValidateBatch() where it entered the engine: no id is walked again to
  // re-check it. Its sizes, which cost nothing, are checked: a bad one must never reach a
  // kernel (it would fault the device).
  FUSERANK_CHECK(!batch.candidate_begin.empty() &&
                 batch.top_k.size() == batch.candidate_begin.size() - 1)
      << "batch packer: candidate_begin or top_k malformed (the batch was not validated)";
  const uint32_t requests = static_cast<uint32_t>(batch.num_requests());
  const uint32_t candidates = static_cast<uint32_t>(batch.num_candidates());
  FUSERANK_CHECK(batch.user_dense.size() == size_t{requests} * info_.dense_user &&
                 batch.item_dense.size() == size_t{candidates} * info_.dense_item)
      << "batch packer: dense sizes do not match the model (the batch was not validated)";
  top_k_.resize(requests);
  result_begin_.assign(1, 0);
  uint32_t max_segment = 0;
  for (uint32_t r = 0; r < requests; ++r) {
    const uint32_t count = batch.candidate_begin[r + 1] - batch.candidate_begin[r];
    max_segment = std::max(max_segment, count);
    // 0 reads as "every candidate", the CPU backend's rule (cpu_backend.cc, SelectTopK).
    // ValidateBatch() refuses it for a request with candidates (the decoders write the
    // count), so only a batch built without them, a benchmark's or a test's, brings it.
    top_k_[r] = batch.top_k[r] == 0 ? count : std::min(batch.top_k[r], count);
    result_begin_.push_back(result_begin_.back() + top_k_[r]);
  }
  const size_t user_tables = info_.user_rows.size();
  FUSERANK_CHECK((info_.user_mean.empty() || info_.user_mean.size() == user_tables) &&
                 (info_.item_mean.empty() || info_.item_mean.size() == info_.item_rows.size()))
      << "batch packer: PackInfo's pooling flags do not match its tables";
  ids_per_table_.assign(user_tables + info_.item_rows.size(), 0);
  CountIds(batch.user, requests, user_tables, "user", ids_per_table_.data());
  CountIds(batch.item, candidates, info_.item_rows.size(), "item",
           ids_per_table_.data() + user_tables);
  if (reorder_) Deduplicate(batch);
  kernels::PackedCounts counts;
  counts.num_requests = requests;
  counts.num_candidates = candidates;
  counts.user_tables = static_cast<uint32_t>(user_tables);
  counts.item_tables = static_cast<uint32_t>(info_.item_rows.size());
  counts.num_user_ids = static_cast<uint32_t>(batch.user.rows.size());
  counts.num_item_ids = static_cast<uint32_t>(batch.item.rows.size());
  counts.dense_user = info_.dense_user;
  counts.dense_item = info_.dense_item;
  counts.has_weights = !AllOnes(batch.user.weights) || !AllOnes(batch.item.weights);
  counts.num_unique = reorder_ ? static_cast<uint32_t>(unique_.size()) : 0;
  kernels::PackedHeader h;
  if (!kernels::ComputePackedLayout(counts, &h)) {
    return absl::InvalidArgumentError("batch: too large for 32-bit offsets");
  }
  h.total_results = result_begin_.back();
  h.max_segment = max_segment;
  return h;
}

void BatchPacker::Write(const Batch& batch, const kernels::PackedHeader& h, void* dst) const {
  std::memcpy(dst, &h, sizeof(h));
  Put(dst, h.candidate_begin, batch.candidate_begin);
  Put(dst, h.top_k, top_k_);
  Put(dst, h.result_begin, result_begin_);
  Put(dst, h.user_bag_begin, batch.user.bag_begin);
  Put(dst, h.item_bag_begin, batch.item.bag_begin);
  if (reorder_) {
    Put(dst, h.user_rows, user_slots_);
    Put(dst, h.item_rows, item_slots_);
    Put(dst, h.unique_rows, unique_);
  } else {
    Put(dst, h.user_rows, batch.user.rows);
    Put(dst, h.item_rows, batch.item.rows);
  }
  if (h.has_weights) {
    Put(dst, h.user_weights, batch.user.weights);
    Put(dst, h.item_weights, batch.item.weights);
    auto* base = static_cast<unsigned char*>(dst);
    ZeroCancellingMeanBags(batch.user, info_.user_mean,
                           reinterpret_cast<float*>(base + h.user_weights));
    ZeroCancellingMeanBags(batch.item, info_.item_mean,
                           reinterpret_cast<float*>(base + h.item_weights));
  }
  Put(dst, h.user_dense, batch.user_dense);
  Put(dst, h.item_dense, batch.item_dense);
}

void BatchPacker::Deduplicate(const Batch& batch) {
  keys_.clear();
  const uint32_t user_tables = static_cast<uint32_t>(info_.user_rows.size());
  const uint32_t item_tables = static_cast<uint32_t>(info_.item_rows.size());
  auto collect = [&](const BagSet& bags, uint32_t tables, uint32_t table_base, uint32_t occ) {
    for (size_t b = 0; b < bags.num_bags(); ++b) {
      const uint64_t table = table_base + b % tables;
      for (uint32_t j = bags.bag_begin[b]; j < bags.bag_begin[b + 1]; ++j) {
        keys_.push_back({(table << 32) | static_cast<uint32_t>(bags.rows[j]), occ + j});
      }
    }
  };
  const uint32_t user_ids = static_cast<uint32_t>(batch.user.rows.size());
  collect(batch.user, user_tables, 0, 0);
  collect(batch.item, item_tables, user_tables, user_ids);
  std::sort(keys_.begin(), keys_.end());
  unique_.clear();
  user_slots_.resize(user_ids);
  item_slots_.resize(batch.item.rows.size());
  for (size_t k = 0; k < keys_.size(); ++k) {
    if (k == 0 || keys_[k].first != keys_[k - 1].first) {
      unique_.push_back({static_cast<uint32_t>(keys_[k].first >> 32),
                         static_cast<int32_t>(keys_[k].first & 0xFFFFFFFFu)});
    }
    const int32_t slot = static_cast<int32_t>(unique_.size() - 1);
    const uint32_t occ = keys_[k].second;
    if (occ < user_ids) {
      user_slots_[occ] = slot;
    } else {
      item_slots_[occ - user_ids] = slot;
    }
  }
}

}  // namespace fuserank::engine::cuda
