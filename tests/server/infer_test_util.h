// Shared pieces of the TensorDecoder tests: a small model with every kind of table, a good
// RankRequest for it and its KServe v2 twin, tensors set by hand, and a field-by-field
// comparison of two engine::Batch. Test helpers; not thread-safe.
#ifndef FUSERANK_TESTS_SERVER_INFER_TEST_UTIL_H_
#define FUSERANK_TESTS_SERVER_INFER_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/batch.h"
#include "engine/model.h"
#include "fuserank/v1/ranker.pb.h"
#include "inference/grpc_service.pb.h"
#include "tests/testing/test_model.h"

namespace fuserank::testing {

// user_0 (100 rows), user_1 (50 rows, oov: reject), item_0 (100 rows), item_1 (10 rows,
// oov: reject, mean pooling); dense {user: 2, item: 3}; dim 4.
TestModel InferTestModel();
std::shared_ptr<const engine::Model> BuildInferTestModel();

// Two candidates; multi-hot, weighted, out-of-order and missing bags (as the
// RequestDecoder tests' good request).
v1::RankRequest GoodRankRequest();
// GoodRankRequest() as v2 tensors with typed contents (every table sent).
inference::ModelInferRequest GoodInferRequest();

// Replaces input `name` (or adds it) with typed contents of its datatype.
void SetInt64(inference::ModelInferRequest* request, const std::string& name,
              std::vector<int64_t> shape, std::vector<int64_t> values);
void SetInt32(inference::ModelInferRequest* request, const std::string& name,
              std::vector<int64_t> shape, std::vector<int32_t> values);
void SetFp32(inference::ModelInferRequest* request, const std::string& name,
             std::vector<int64_t> shape, std::vector<float> values);
void RemoveInput(inference::ModelInferRequest* request, const std::string& name);

// Adds a gtest failure for every array in which `a` and `b` differ (floats bit for bit).
void ExpectSameBatch(const engine::Batch& a, const engine::Batch& b);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_SERVER_INFER_TEST_UTIL_H_
