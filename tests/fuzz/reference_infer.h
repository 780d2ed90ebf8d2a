// A naive, independent re-statement of SPEC section 6's input tensors, for the infer request
// fuzzer: a ModelInferRequest turned into the RankRequest it stands for (the bags, dense
// rows, item ids and top_k it carries), or the first tensor rule it breaks. SPEC section 3's
// content rules (NaN, oov: reject, counts, limits per feature) are then ReferenceDecode's
// (reference_decode.h) on that RankRequest. Written for clarity, not speed: plain loops and
// copies, no code shared with server/. Thread-safe.
#ifndef FUSERANK_TESTS_FUZZ_REFERENCE_INFER_H_
#define FUSERANK_TESTS_FUZZ_REFERENCE_INFER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model.h"
#include "fuserank/v1/ranker.pb.h"
#include "inference/grpc_service.pb.h"
#include "server/request_decoder.h"

namespace fuserank::fuzz {

struct ReferenceInfer {
  bool valid = false;             // the tensors are well-formed (their values unchecked)
  std::string reason;             // the first tensor rule broken, when !valid
  v1::RankRequest rank;           // the equivalent request, when valid
  std::vector<int64_t> item_ids;  // the input item_ids, when valid
};

// The tensor rules: `raw_input_contents` empty, or one entry per input and no input with
// contents; every input one of the model's (per table t: t, t__lengths, t__weights; then
// user_dense, item_dense, item_ids), each at most once; each of its datatype (INT64 ids and
// item_ids, INT32 lengths, FP32 the rest) and rank (2 for the dense inputs, else 1), no
// dimension negative, holding exactly its shape's elements (raw: that many little-endian
// bytes; typed: in its datatype's field, every other field empty); item_ids present, N of
// them, at most limits.max_candidates; parameter top_k an int64 >= 0 or a uint64 (capped
// at 2^32 - 1); user_dense [1, du]; item_dense [N, di] (any width when N = 0), required
// when N > 0 and di > 0; per table, lengths of one bag (user) or N (item), none negative,
// summing to the ids, required when there are ids; weights one per id; at most
// limits.max_ids ids in all.
ReferenceInfer ReferenceInferToRank(const engine::Model& model, const server::DecodeLimits& limits,
                                    const inference::ModelInferRequest& request);

}  // namespace fuserank::fuzz

#endif  // FUSERANK_TESTS_FUZZ_REFERENCE_INFER_H_
