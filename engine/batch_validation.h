// The one validation of a Batch, where requests enter the engine (Batcher::Submit): its
// CSR arrays agree with each other and with its model's tables and dense widths, and every
// row lies in its table. Backends take a batch that passed it, or a merge of such batches
// (Batch::Append), as given: they walk no id a second time to re-check it. Thread-safe.
#ifndef FUSERANK_ENGINE_BATCH_VALIDATION_H_
#define FUSERANK_ENGINE_BATCH_VALIDATION_H_

#include "absl/status/status.h"
#include "engine/batch.h"

namespace fuserank::engine {

// OK, or INVALID_ARGUMENT ("batch: ...") naming the first inconsistency: no model,
// candidate_begin or top_k malformed (a top_k outside 1..the request's candidates, 0 for a
// request of none), bags of the wrong count or reversed, dense features
// of the wrong size, a row out of range for its table.
absl::Status ValidateBatch(const Batch& batch);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_BATCH_VALIDATION_H_
