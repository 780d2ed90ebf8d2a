// A naive, independent re-statement of SPEC section 3 (request validation) and of the
// decode of SPEC section 2 step 1, for the request decoder fuzzer to compare against.
// Written for clarity, not speed: plain loops, no shared code with server/. Thread-safe.
#ifndef FUSERANK_TESTS_FUZZ_REFERENCE_DECODE_H_
#define FUSERANK_TESTS_FUZZ_REFERENCE_DECODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model.h"
#include "fuserank/v1/ranker.pb.h"
#include "server/request_decoder.h"

namespace fuserank::fuzz {

struct ReferenceBag {
  std::vector<int32_t> rows;
  std::vector<float> weights;
};

struct ReferenceResult {
  bool valid = false;
  std::string reason;  // the first rule broken, when !valid
  int num_candidates = 0;
  uint32_t top_k = 0;
  std::vector<float> user_dense;
  std::vector<float> item_dense;        // candidates x dense_item
  std::vector<ReferenceBag> user_bags;  // one per Model::user_tables()
  std::vector<ReferenceBag> item_bags;  // candidates x Model::item_tables()
};

ReferenceResult ReferenceDecode(const engine::Model& model, const server::DecodeLimits& limits,
                                const v1::RankRequest& request);

}  // namespace fuserank::fuzz

#endif  // FUSERANK_TESTS_FUZZ_REFERENCE_DECODE_H_
