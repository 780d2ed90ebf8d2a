// Shared pieces of the KServe v2 end-to-end tests: three models served under `models:`
// names of their own, the real server started in-process on 127.0.0.1:0, one ModelInfer
// call, and the outputs of a response read back from raw_output_contents.
// Test helpers; not thread-safe.
#ifndef FUSERANK_TESTS_E2E_KSERVE_UTIL_H_
#define FUSERANK_TESTS_E2E_KSERVE_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inference/grpc_service.grpc.pb.h"
#include "server/server.h"
#include "tests/testing/test_model.h"

namespace fuserank::testing {

// A model and the name it is served under (models[].name).
struct NamedModel {
  std::string name;
  TestModel model;
};

// "ranker_a": dot, two user tables (one oov: reject), three item tables (mean, reject),
// dense 3 + 2; "concat16" (no name given: the spec's), concat, fp16, no user tables;
// "linear_nodense": linear cross, no dense features.
std::vector<NamedModel> KServeModels();

// Starts a server for `models` with the e2e limits (max_request_bytes 65536,
// max_candidates 64, max_ids_per_feature 8); metrics on a free port. A model with an
// empty name is listed without one (it serves under its spec's name).
absl::StatusOr<std::unique_ptr<server::Server>> StartKServeServer(
    const std::vector<NamedModel>& models, const std::string& dir);

struct InferReply {
  grpc::Status status;
  inference::ModelInferResponse response;
};

// ModelInfer with a 30 s deadline.
InferReply Infer(inference::GRPCInferenceService::Stub* stub,
                 const inference::ModelInferRequest& request);

// The outputs of `response` read from raw_output_contents; a gtest failure when one is
// not there as SPEC section 6 says (name, datatype, shape [K], byte count).
struct InferOutputs {
  std::vector<float> scores;
  std::vector<int32_t> indices;
  std::vector<int64_t> item_ids;
};
InferOutputs ReadOutputs(const inference::ModelInferResponse& response);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_KSERVE_UTIL_H_
