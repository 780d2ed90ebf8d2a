#include "server/model_warmup.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"

namespace fuserank::server {
namespace {

void AppendOneRowBags(const engine::Model& model, const std::vector<int>& tables, int salt,
                      engine::BagSet* bags) {
  for (int t : tables) {
    const engine::EmbeddingTable& table = model.tables()[t];
    const int64_t id = int64_t{salt} * 7919 + t;
    bags->rows.push_back(table.remote ? 0 : static_cast<int32_t>(id % table.rows));
    if (model.spec().has_remote_tables()) bags->keys.push_back(id);
    bags->weights.push_back(1.0f);
    bags->bag_begin.push_back(static_cast<uint32_t>(bags->rows.size()));
  }
}

}  // namespace

engine::Batch SyntheticBatch(const std::shared_ptr<const engine::Model>& model,
                             const std::vector<int>& requests) {
  engine::Batch batch;
  batch.model = model;
  const engine::ModelSpec& spec = model->spec();
  int candidates = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    const int count = requests[r];
    AppendOneRowBags(*model, model->user_tables(), static_cast<int>(r), &batch.user);
    for (int c = 0; c < count; ++c) {
      AppendOneRowBags(*model, model->item_tables(), candidates + c + 1, &batch.item);
    }
    candidates += count;
    batch.candidate_begin.push_back(static_cast<uint32_t>(candidates));
    batch.top_k.push_back(static_cast<uint32_t>(count));
  }
  batch.user_dense.assign(requests.size() * spec.dense_user, 0.5f);
  batch.item_dense.assign(static_cast<size_t>(candidates) * spec.dense_item, 0.5f);
  return batch;
}

uint64_t TouchTablePages(const engine::Model& model) {
  const size_t page = static_cast<size_t>(std::max(4096L, ::sysconf(_SC_PAGESIZE)));
  uint64_t sum = 0;
  auto touch = [&](const std::byte* data, size_t bytes) {
    if (data == nullptr) return;
    const volatile std::byte* p = data;
    for (size_t offset = 0; offset < bytes; offset += page) sum += static_cast<uint8_t>(p[offset]);
    if (bytes > 0) sum += static_cast<uint8_t>(p[bytes - 1]);
  };
  for (const engine::EmbeddingTable& table : model.tables()) {
    touch(table.data, static_cast<size_t>(table.rows) * table.row_bytes);
    if (table.qparams != nullptr) {
      touch(reinterpret_cast<const std::byte*>(table.qparams),
            static_cast<size_t>(table.rows) * 2 * sizeof(float));
    }
  }
  return sum;
}

absl::Status WarmUpBackend(const std::shared_ptr<const engine::Model>& model,
                           engine::Backend* backend, int max_batch_candidates,
                           int max_request_candidates) {
  engine::BatchResult result;
  for (const std::vector<int>& requests :
       backend->WarmupBatches(max_batch_candidates, max_request_candidates)) {
    const engine::Batch batch = SyntheticBatch(model, requests);
    const int candidates = batch.num_candidates();
    for (int worker = 0; worker < backend->num_workers(); ++worker) {
      result.Clear();
      const absl::Status run = backend->Run(worker, batch, &result);
      if (!run.ok()) {
        return absl::FailedPreconditionError(absl::StrCat("warm-up batch of ", candidates,
                                                          " candidates on worker ", worker,
                                                          " failed: ", run.message()));
      }
      if (result.items.size() != static_cast<size_t>(candidates)) {
        return absl::FailedPreconditionError(absl::StrCat("warm-up batch of ", candidates,
                                                          " candidates returned ",
                                                          result.items.size(), " scores"));
      }
      for (const engine::ScoredIndex& item : result.items) {
        if (!(item.score >= 0.0f && item.score <= 1.0f)) {
          return absl::FailedPreconditionError(
              absl::StrCat("warm-up scores are not in [0, 1] (got ", item.score,
                           "): the weights hold NaN, Inf or values out of any sane range"));
        }
      }
    }
  }
  backend->FlushLookupCounts();  // the warm-up's lookups are not traffic (StartServing)
  return absl::OkStatus();
}

}  // namespace fuserank::server
