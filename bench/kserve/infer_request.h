// The KServe v2 request that asks what a fuserank.v1.RankRequest asks (SPEC section 6):
// per table t of the spec, `t` (INT64, every bag's ids concatenated), `t__lengths` (INT32,
// one per bag) and `t__weights` (FP32, when some bag of t has weights; 1 for the others);
// `user_dense` [1, du], `item_dense` [N, di], `item_ids` [N]; the parameter `top_k`. For
// the tests (ModelInfer and Rank score alike) and perf_analyzer's input data. Also the
// perf_analyzer input-data JSON of such requests. Pure functions; thread-safe.
#ifndef FUSERANK_BENCH_KSERVE_INFER_REQUEST_H_
#define FUSERANK_BENCH_KSERVE_INFER_REQUEST_H_

#include <string>

#include "engine/model_spec.h"
#include "fuserank/v1/ranker.pb.h"
#include "inference/grpc_service.pb.h"

namespace fuserank::bench {

enum class TensorContents { kRaw, kTyped };  // raw_input_contents, or each input's contents

struct InferRequestOptions {
  TensorContents contents = TensorContents::kRaw;
  // Send `t` and `t__lengths` for every table, even one no bag uses (zero lengths); else
  // only for tables some bag uses.
  bool every_table = false;
};

// `request` must be valid for `spec` (the conversion assumes one weight per id or none).
inference::ModelInferRequest ToInferRequest(const engine::ModelSpec& spec,
                                            const v1::RankRequest& request,
                                            const InferRequestOptions& options);

// One entry of perf_analyzer's --input-data JSON: {"<input>": {"content": [...],
// "shape": [...]}, ...} for every input of `request` (which must use typed contents).
std::string PerfAnalyzerEntry(const inference::ModelInferRequest& request);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_KSERVE_INFER_REQUEST_H_
