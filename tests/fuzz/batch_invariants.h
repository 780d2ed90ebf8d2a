// Invariants of an engine::Batch built by RequestDecoder (engine/batch.h's layout), checked
// with FUZZ_CHECK: any violation aborts the fuzz target. Plain functions, thread-safe.
#ifndef FUSERANK_TESTS_FUZZ_BATCH_INVARIANTS_H_
#define FUSERANK_TESTS_FUZZ_BATCH_INVARIANTS_H_

#include "engine/batch.h"
#include "server/request_decoder.h"
#include "tests/fuzz/reference_decode.h"

namespace fuserank::fuzz {

// Every array of `a` and `b` equal, and the same model.
bool SameBatch(const engine::Batch& a, const engine::Batch& b);

// CSR consistency over the whole batch: offsets start at 0, never decrease and end at the
// array sizes; bag and dense counts match the request and candidate counts; every row lies
// in its table; weights and dense values are finite; top_k in 1..count (0 only when the
// request has no candidates); no bag or request beyond `limits`.
void CheckBatchInvariants(const engine::Batch& batch, const server::DecodeLimits& limits);

// The batch's last request holds exactly what the reference decoded.
void CheckLastRequest(const engine::Batch& batch, const ReferenceResult& expected);

}  // namespace fuserank::fuzz

#endif  // FUSERANK_TESTS_FUZZ_BATCH_INVARIANTS_H_
