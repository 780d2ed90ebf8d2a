#include "engine/remote_tier.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote_stage.h"

namespace fuserank::engine {
namespace {

using Clock = std::chrono::steady_clock;
// remote::ErrorKind::kNone's index stands for "value_size" (remote::ErrorKind::kValueSize).
constexpr int kValueSizeError = 0;

// The bags of one table: bag b = first + k * stride for k < count.
struct TableBags {
  const BagSet* bags;
  int32_t* rows;  // the stage's copy of bags->rows
  int first;
  int stride;
  int count;
};

TableBags BagsOf(const Model& model, const Batch& batch, int t, RemoteStage* stage,
                 std::vector<int32_t>* user_rows, std::vector<int32_t>* item_rows) {
  const bool user = model.tables()[t].side == Side::kUser;
  const std::vector<int>& order = user ? model.user_tables() : model.item_tables();
  const int position = static_cast<int>(std::find(order.begin(), order.end(), t) - order.begin());
  const int stride = static_cast<int>(order.size());
  const int count = user ? batch.num_requests() : batch.num_candidates();
  return {user ? &batch.user : &batch.item, (user ? user_rows : item_rows)->data(), position,
          stride, count};
}

// Bytes of one value of `table` in the cluster: the row's elements and, for int8, its
// (scale, bias) as two float32.
size_t ValueBytesOf(const EmbeddingTable& table) {
  return table.row_bytes + (table.dtype == DType::kInt8 ? 2 * sizeof(float) : 0);
}

// The request that bag k of `bags` belongs to.
int RequestOf(const Batch& batch, const Model& model, int t, int k) {
  if (model.tables()[t].side == Side::kUser) return k;
  const auto& begin = batch.candidate_begin;
  return static_cast<int>(std::upper_bound(begin.begin(), begin.end(), static_cast<uint32_t>(k)) -
                          begin.begin()) -
         1;
}

}  // namespace

std::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kHot:
      return "hot";
    case Tier::kNear:
      return "near";
    case Tier::kRemote:
      return "remote";
    case Tier::kAbsent:
      return "absent";
  }
  return "unknown";
}

std::string_view RemoteErrorName(int kind) {
  if (kind == kValueSizeError) return "value_size";
  return remote::ErrorKindName(static_cast<remote::ErrorKind>(kind));
}

namespace {
std::atomic<uint64_t> next_tier_id{1};
constexpr size_t kValueSlackBytes = 64 << 10;
}  // namespace

RemoteTier::RemoteTier(std::shared_ptr<const Model> model, const RemoteTierOptions& options)
    : model_(std::move(model)),
      options_(options),
      id_(next_tier_id.fetch_add(1, std::memory_order_relaxed)),
      counters_(new RemoteTableCounters[model_->tables().size()]) {
  for (const EmbeddingTable& table : model_->tables()) {
    near_.push_back(table.remote
                        ? std::make_unique<NearCache>(
                              static_cast<size_t>(options.near_cache_rows), ValueBytesOf(table),
                              std::chrono::milliseconds(options.near_cache_ttl_ms))
                        : nullptr);
  }
}

RemoteTier::~RemoteTier() = default;

absl::Status RemoteTier::Create(std::shared_ptr<const Model> model,
                                const RemoteTierOptions& options,
                                std::unique_ptr<RemoteTier>* tier) {
  tier->reset(new RemoteTier(std::move(model), options));
  remote::ClusterOptions cluster;
  cluster.seeds = options.seed_nodes;
  cluster.pool_size = options.pool_size;
  // A value of the wrong length up to the longest row plus the slack is its key's
  // value_size error, its bytes dropped as they arrive (it costs no memory); only a longer
  // one fails its node's pipeline, as soon as its length arrives.
  size_t longest = 0;
  for (int t = 0; t < static_cast<int>((*tier)->model_->tables().size()); ++t) {
    longest = std::max(longest, (*tier)->ValueBytes(t));
  }
  cluster.max_value_bytes = longest + kValueSlackBytes;
  absl::Status status = remote::ClusterClient::Create(cluster, &(*tier)->client_);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("remote.seed_nodes: the Redis cluster is unreachable: ", status.message()));
  }
  return absl::OkStatus();
}

std::string RemoteTier::Key(int table, int64_t id) const {
  return absl::StrCat(options_.key_prefix, model_->tables()[table].name, ":", id);
}

size_t RemoteTier::ValueBytes(int table) const { return ValueBytesOf(model_->tables()[table]); }

std::array<uint64_t, kFetchBuckets.size() + 1> RemoteTier::fetch_buckets() const {
  std::array<uint64_t, kFetchBuckets.size() + 1> out{};
  uint64_t total = 0;
  for (size_t b = 0; b < out.size(); ++b) {
    total += fetch_counts_[b].load(std::memory_order_relaxed);
    out[b] = total;
  }
  return out;
}

double RemoteTier::fetch_seconds_sum() const {
  return static_cast<double>(fetch_nanos_.load(std::memory_order_relaxed)) * 1e-9;
}

void RemoteTier::ResetCounts() {
  for (size_t t = 0; t < model_->tables().size(); ++t) {
    for (auto& n : counters_[t].lookups) n.store(0, std::memory_order_relaxed);
    for (auto& n : counters_[t].errors) n.store(0, std::memory_order_relaxed);
  }
  for (auto& n : fetch_counts_) n.store(0, std::memory_order_relaxed);
  fetch_nanos_.store(0, std::memory_order_relaxed);
  round_trips_.store(0, std::memory_order_relaxed);
  fetches_.store(0, std::memory_order_relaxed);
}

void RemoteTier::RecordFetch(double seconds, int round_trips) {
  const size_t bucket =
      std::lower_bound(kFetchBuckets.begin(), kFetchBuckets.end(), seconds) - kFetchBuckets.begin();
  fetch_counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  fetch_nanos_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
  round_trips_.fetch_add(round_trips, std::memory_order_relaxed);
  fetches_.fetch_add(1, std::memory_order_relaxed);
}

absl::Status RemoteTier::FetchRows(int t, absl::Span<const int64_t> ids,
                                   std::vector<std::byte>* values, std::vector<bool>* present) {
  const size_t value_bytes = ValueBytes(t);
  values->assign(ids.size() * value_bytes, std::byte{0});
  present->assign(ids.size(), false);
  if (ids.empty()) return absl::OkStatus();
  std::vector<std::string> keys;
  keys.reserve(ids.size());
  std::vector<remote::Command> commands;
  commands.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    keys.push_back(Key(t, ids[i]));
    // Each value straight into its row: a value of another length is not kept anywhere.
    commands.push_back({keys.back(), {}, false, {values->data() + i * value_bytes, value_bytes}});
  }
  std::vector<remote::Reply> replies;
  client_->Run(commands, Clock::now() + std::chrono::milliseconds(kHotFetchDeadlineMs), &replies);
  for (size_t i = 0; i < ids.size(); ++i) {
    const remote::Reply& reply = replies[i];
    if (reply.state == remote::Reply::State::kAbsent) continue;
    if (reply.state == remote::Reply::State::kValue) {
      (*present)[i] = true;
      continue;
    }
    const std::string why =
        reply.error == remote::ErrorKind::kValueSize
            ? absl::StrCat("a value of ", reply.announced_bytes, " bytes, want ", value_bytes)
            : std::string(remote::ErrorKindName(reply.error));
    return absl::UnavailableError(absl::StrCat(
        "table '", model_->tables()[t].name, "': the hot rows could not be fetched from the ",
        "Redis cluster (key ", keys[i], ": ", why, "); the hot sets are unchanged"));
  }
  return absl::OkStatus();
}

void RemoteTier::Stage(const Batch& batch, const HotRowSnapshot* hot, int sample_period,
                       RemoteStage* stage, std::vector<absl::Status>* request_errors) {
  const Model& model = *model_;
  const int num_tables = static_cast<int>(model.tables().size());
  stage->tables_.resize(num_tables);
  stage->bytes_.resize(num_tables);
  stage->keys_.resize(num_tables);
  stage->qparams_.resize(num_tables);
  stage->hot_hits_.assign(num_tables, 0);
  stage->hot_misses_.assign(num_tables, 0);
  stage->sampled_.resize(num_tables);
  stage->user_rows_.assign(batch.user.rows.begin(), batch.user.rows.end());
  stage->item_rows_.assign(batch.item.rows.begin(), batch.item.rows.end());
  stage->pending_.clear();
  const Clock::time_point now = Clock::now();
  // The batch's distinct keys per table, each looked up in the near cache.
  for (int t = 0; t < num_tables; ++t) {
    const EmbeddingTable& table = model.tables()[t];
    stage->tables_[t] = table;
    if (!table.remote) continue;
    const TableBags tb = BagsOf(model, batch, t, stage, &stage->user_rows_, &stage->item_rows_);
    std::vector<RemoteStage::Key>& keys = stage->keys_[t];
    keys.clear();
    stage->slot_of_.clear();
    for (int k = 0; k < tb.count; ++k) {
      const size_t b = static_cast<size_t>(k) * tb.stride + tb.first;
      for (uint32_t i = tb.bags->bag_begin[b]; i < tb.bags->bag_begin[b + 1]; ++i) {
        const int64_t id = tb.bags->keys[i];
        const auto [it, added] = stage->slot_of_.try_emplace(id, static_cast<int32_t>(keys.size()));
        if (added) keys.push_back({id, 0, Tier::kAbsent, false});
        ++keys[it->second].uses;
        tb.rows[i] = it->second;
      }
    }
    // Values as the cluster holds them, one per slot; an int8 table's codes are read in
    // place (row_bytes: the value's stride) and its (scale, bias) copied out after.
    const size_t value_bytes = ValueBytesOf(table);
    std::vector<std::byte>& bytes = stage->bytes_[t];
    bytes.resize(std::max<size_t>(1, keys.size()) * value_bytes);
    // Every sample_period-th use of an id is sampled (a key used k times: about
    // k / sample_period samples).
    std::vector<int64_t>& sampled = stage->sampled_[t];
    sampled.clear();
    if (sample_period > 0) {
      for (const RemoteStage::Key& key : keys) {
        stage->countdown_ -= key.uses;
        while (stage->countdown_ <= 0) {
          sampled.push_back(key.id);
          stage->countdown_ += sample_period;
        }
      }
    }
    const HotSet* set = hot != nullptr && hot->table(t).size() > 0 ? &hot->table(t) : nullptr;
    stage->near_ids_.clear();
    stage->near_rows_.clear();
    stage->near_slots_.clear();
    for (size_t s = 0; s < keys.size(); ++s) {
      std::byte* row = bytes.data() + s * value_bytes;
      if (hot != nullptr) {
        const int32_t slot = set == nullptr ? -1 : set->FindId(keys[s].id);
        (slot >= 0 ? stage->hot_hits_ : stage->hot_misses_)[t] += keys[s].uses;
        if (slot >= 0) {
          std::memcpy(row, set->slot_data(slot), value_bytes);
          keys[s].tier = Tier::kHot;
          continue;
        }
      }
      stage->near_ids_.push_back(keys[s].id);
      stage->near_rows_.push_back(row);
      stage->near_slots_.push_back(static_cast<int32_t>(s));
    }
    // The rest from the near cache, their reads overlapped.
    stage->near_found_.resize(stage->near_ids_.size());
    near_[t]->FindMany(stage->near_ids_, now, stage->near_rows_,
                       absl::MakeSpan(stage->near_found_));
    for (size_t i = 0; i < stage->near_ids_.size(); ++i) {
      const size_t s = static_cast<size_t>(stage->near_slots_[i]);
      std::byte* row = stage->near_rows_[i];
      switch (stage->near_found_[i]) {
        case NearCache::Found::kRow:
          keys[s].tier = Tier::kNear;
          break;
        case NearCache::Found::kAbsent:
          std::memset(row, 0, value_bytes);
          keys[s].tier = Tier::kAbsent;
          break;
        case NearCache::Found::kMiss:
          stage->pending_.push_back({t, static_cast<int32_t>(s)});
          break;
      }
    }
    stage->tables_[t].data = bytes.data();
    stage->tables_[t].row_bytes = value_bytes;
    stage->tables_[t].rows = static_cast<int64_t>(keys.size());
  }
  // One pipelined fetch for every table's misses.
  if (!stage->pending_.empty()) {
    const size_t n = stage->pending_.size();
    stage->key_text_.resize(std::max(stage->key_text_.size(), n));
    stage->commands_.resize(n);
    for (size_t p = 0; p < n; ++p) {
      const RemoteStage::Pending& pending = stage->pending_[p];
      std::string& text = stage->key_text_[p];
      text.clear();
      absl::StrAppend(&text, options_.key_prefix, model.tables()[pending.table].name, ":",
                      stage->keys_[pending.table][pending.slot].id);
      // The value goes straight into its staged row: what the batch keeps is its rows, and
      // a value of another length is dropped as it arrives.
      const size_t value_bytes = ValueBytesOf(model.tables()[pending.table]);
      stage->commands_[p] = {
          text,
          {},
          false,
          {stage->bytes_[pending.table].data() + pending.slot * value_bytes, value_bytes}};
    }
    const Clock::time_point start = Clock::now();
    // fetch_deadline_ms, or less when every request of the batch is due before that.
    const Clock::time_point deadline =
        std::min(start + std::chrono::milliseconds(options_.fetch_deadline_ms), batch.deadline);
    const remote::RunStats stats = client_->Run(stage->commands_, deadline, &stage->replies_);
    RecordFetch(std::chrono::duration<double>(Clock::now() - start).count(), stats.round_trips);
    const Clock::time_point fetched = Clock::now();
    for (size_t p = 0; p < n; ++p) {
      const RemoteStage::Pending& pending = stage->pending_[p];
      const size_t value_bytes = ValueBytesOf(model.tables()[pending.table]);
      RemoteStage::Key& key = stage->keys_[pending.table][pending.slot];
      std::byte* row = stage->bytes_[pending.table].data() + pending.slot * value_bytes;
      const remote::Reply& reply = stage->replies_[p];
      int error = -1;
      if (reply.state == remote::Reply::State::kValue) {  // written into `row` by the fetch
        near_[pending.table]->Insert(key.id, row, fetched);
        key.tier = Tier::kRemote;
      } else if (reply.state == remote::Reply::State::kAbsent) {
        std::memset(row, 0, value_bytes);
        near_[pending.table]->Insert(key.id, nullptr, fetched);
        key.tier = Tier::kAbsent;
      } else {
        error = reply.error == remote::ErrorKind::kValueSize ? kValueSizeError
                                                             : static_cast<int>(reply.error);
      }
      if (error >= 0) {
        std::memset(row, 0, value_bytes);
        key.failed = true;
        counters_[pending.table].errors[error].fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  // An int8 table's (scale, bias) pairs, contiguous as the lookup reads them (zeros, so
  // zero values, for absent and failed keys).
  for (int t = 0; t < num_tables; ++t) {
    const EmbeddingTable& table = model.tables()[t];
    if (!table.remote || table.dtype != DType::kInt8) continue;
    const size_t value_bytes = ValueBytesOf(table);
    const size_t n = stage->keys_[t].size();
    std::vector<float>& qparams = stage->qparams_[t];
    qparams.resize(std::max<size_t>(1, n) * 2);
    for (size_t s = 0; s < n; ++s) {
      std::memcpy(&qparams[2 * s], stage->bytes_[t].data() + s * value_bytes + table.row_bytes,
                  2 * sizeof(float));
    }
    stage->tables_[t].qparams = qparams.data();
  }
  // Tallies, and the requests that needed a row that did not come.
  for (int t = 0; t < num_tables; ++t) {
    if (!model.tables()[t].remote) continue;
    std::array<uint64_t, kTiers> tally{};
    bool any_failed = false;
    for (const RemoteStage::Key& key : stage->keys_[t]) {
      if (key.failed) {
        any_failed = true;
      } else {
        tally[static_cast<int>(key.tier)] += key.uses;
      }
    }
    for (int tier = 0; tier < kTiers; ++tier) {
      if (tally[tier] != 0)
        counters_[t].lookups[tier].fetch_add(tally[tier], std::memory_order_relaxed);
    }
    if (!any_failed || options_.on_remote_error == OnRemoteError::kZero) continue;
    const TableBags tb = BagsOf(model, batch, t, stage, &stage->user_rows_, &stage->item_rows_);
    for (int k = 0; k < tb.count; ++k) {
      const size_t b = static_cast<size_t>(k) * tb.stride + tb.first;
      for (uint32_t i = tb.bags->bag_begin[b]; i < tb.bags->bag_begin[b + 1]; ++i) {
        if (!stage->keys_[t][tb.rows[i]].failed) continue;
        if (request_errors->empty()) request_errors->assign(batch.num_requests(), absl::OkStatus());
        absl::Status& status = (*request_errors)[RequestOf(batch, model, t, k)];
        if (status.ok()) {
          status = absl::UnavailableError(
              absl::StrCat("table '", model.tables()[t].name,
                           "': rows could not be fetched from the Redis cluster in time "
                           "(remote.on_remote_error: fail)"));
        }
        break;
      }
    }
  }
}

}  // namespace fuserank::engine
