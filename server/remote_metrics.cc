#include "server/remote_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <vector>

namespace fuserank::server {

bool FetchIncrements(const RemoteFetchTotals& done, const RemoteFetchTotals& now,
                     std::vector<double>* increments, double* seconds) {
  if (now.buckets.back() <= done.buckets.back() && now.seconds <= done.seconds) return false;
  increments->assign(now.buckets.size(), 0.0);
  for (size_t b = 0; b < now.buckets.size(); ++b) {
    const uint64_t cur = now.buckets[b] - (b == 0 ? 0 : now.buckets[b - 1]);
    const uint64_t old = done.buckets[b] - (b == 0 ? 0 : done.buckets[b - 1]);
    (*increments)[b] = static_cast<double>(cur - old);
  }
  *seconds = now.seconds - done.seconds;
  return true;
}

RemoteMetrics::RemoteMetrics(prometheus::Registry& registry)
    : lookups_(&prometheus::BuildCounter()
                    .Name("fuserank_embedding_tier_lookups_total")
                    .Help("Lookups of storage: redis tables by the tier that served them")
                    .Register(registry)),
      errors_(&prometheus::BuildCounter()
                   .Name("fuserank_remote_errors_total")
                   .Help("Keys the Redis cluster did not answer, by kind")
                   .Register(registry)) {
  const std::vector<double> bounds(engine::kFetchBuckets.begin(), engine::kFetchBuckets.end());
  fetch_seconds_ = &prometheus::BuildHistogram()
                        .Name("fuserank_remote_fetch_duration_seconds")
                        .Help("One batch's remote fetch (every node, in parallel)")
                        .Register(registry)
                        .Add({}, bounds);
  round_trips_ = &prometheus::BuildCounter()
                      .Name("fuserank_remote_round_trips_total")
                      .Help("Node pipelines sent to the Redis cluster")
                      .Register(registry)
                      .Add({});
  fetches_ = &prometheus::BuildCounter()
                  .Name("fuserank_remote_fetches_total")
                  .Help("Batches that fetched rows from the Redis cluster")
                  .Register(registry)
                  .Add({});
}

void RemoteMetrics::Update(const std::vector<ModelHandle>& models) {
  absl::MutexLock lock(&mu_);
  absl::flat_hash_map<std::pair<uint64_t, int>, Exported> exported;
  absl::flat_hash_map<uint64_t, RemoteFetchTotals> totals;
  for (const ModelHandle& served : models) {
    const engine::RemoteTier* tier = served->remote.get();
    if (tier == nullptr) continue;
    const auto& tables = tier->model().tables();
    for (int t = 0; t < static_cast<int>(tables.size()); ++t) {
      if (!tables[t].remote) continue;
      Exported done = exported_[{tier->id(), t}];
      const engine::RemoteTableCounters& counters = tier->counters(t);
      // Every tier's and error kind's series exists from the model's first scrape (at 0).
      for (int k = 0; k < engine::kTiers; ++k) {
        prometheus::Counter& series =
            lookups_->Add({{"table", tables[t].name},
                           {"tier", std::string(engine::TierName(static_cast<engine::Tier>(k)))}});
        const uint64_t now = counters.lookups[k].load(std::memory_order_relaxed);
        if (now > done.lookups[k]) {
          series.Increment(static_cast<double>(now - done.lookups[k]));
          done.lookups[k] = now;
        }
      }
      for (int k = 0; k < engine::kRemoteErrorKinds; ++k) {
        prometheus::Counter& series = errors_->Add(
            {{"table", tables[t].name}, {"kind", std::string(engine::RemoteErrorName(k))}});
        const uint64_t now = counters.errors[k].load(std::memory_order_relaxed);
        if (now > done.errors[k]) {
          series.Increment(static_cast<double>(now - done.errors[k]));
          done.errors[k] = now;
        }
      }
      exported[{tier->id(), t}] = done;
    }
    const RemoteFetchTotals done = totals_[tier->id()];
    const RemoteFetchTotals now{tier->fetch_buckets(), tier->fetch_seconds_sum(),
                                tier->round_trips(), tier->fetches()};
    std::vector<double> increments;
    double seconds = 0;
    if (FetchIncrements(done, now, &increments, &seconds)) {
      fetch_seconds_->ObserveMultiple(increments, seconds);
    }
    if (now.round_trips > done.round_trips) {
      round_trips_->Increment(static_cast<double>(now.round_trips - done.round_trips));
    }
    if (now.fetches > done.fetches) {
      fetches_->Increment(static_cast<double>(now.fetches - done.fetches));
    }
    totals[tier->id()] = now;
  }
  exported_ = std::move(exported);  // retired tiers are forgotten
  totals_ = std::move(totals);
}

}  // namespace fuserank::server
