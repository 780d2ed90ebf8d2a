#include "tests/server/infer_test_util.h"

#include <cstring>

#include "bench/kserve/infer_request.h"
#include "gtest/gtest.h"

namespace fuserank::testing {
namespace {

using inference::ModelInferRequest;

ModelInferRequest::InferInputTensor* Reset(ModelInferRequest* request, const std::string& name,
                                           const char* datatype,
                                           const std::vector<int64_t>& shape) {
  ModelInferRequest::InferInputTensor* input = nullptr;
  for (auto& in : *request->mutable_inputs()) {
    if (in.name() == name) input = &in;
  }
  if (input == nullptr) input = request->add_inputs();
  input->Clear();
  input->set_name(name);
  input->set_datatype(datatype);
  for (int64_t dim : shape) input->add_shape(dim);
  return input;
}

template <typename T>
void ExpectSameBits(const std::vector<T>& a, const std::vector<T>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  if (!a.empty()) {
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)), 0) << what;
  }
}

}  // namespace

TestModel InferTestModel() {
  engine::ModelSpec spec = SmallSpec(2, 2, 100, 4);
  spec.tables[1].rows = 50;
  spec.tables[1].oov = engine::Oov::kReject;
  spec.tables[3].rows = 10;
  spec.tables[3].oov = engine::Oov::kReject;
  spec.tables[3].pooling = engine::Pooling::kMean;
  return MakeRandomModel(spec, 1);
}

std::shared_ptr<const engine::Model> BuildInferTestModel() {
  auto model = BuildTestModel(InferTestModel());
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

v1::RankRequest GoodRankRequest() {
  v1::RankRequest request;
  auto add = [](auto* features, const std::string& name, std::vector<int64_t> ids,
                std::vector<float> weights) {
    v1::Feature* feature = features->Add();
    feature->set_name(name);
    for (int64_t id : ids) feature->add_ids(id);
    for (float w : weights) feature->add_weights(w);
  };
  request.set_request_id("good");
  add(request.mutable_user_features(), "user_1", {3, 49}, {});
  add(request.mutable_user_features(), "user_0", {7, 107, -1}, {0.5f, 2.0f, 1.0f});
  request.add_user_dense(1.0f);
  request.add_user_dense(-2.0f);
  v1::Candidate* c0 = request.add_candidates();
  c0->set_item_id(1000);
  add(c0->mutable_features(), "item_0", {5}, {});
  add(c0->mutable_features(), "item_1", {9, 0}, {0.25f, 0.75f});
  for (float d : {0.1f, 0.2f, 0.3f}) c0->add_dense(d);
  v1::Candidate* c1 = request.add_candidates();
  c1->set_item_id(1001);
  add(c1->mutable_features(), "item_1", {4}, {});  // item_0 missing: empty bag
  for (float d : {0.4f, 0.5f, 0.6f}) c1->add_dense(d);
  return request;
}

ModelInferRequest GoodInferRequest() {
  return bench::ToInferRequest(InferTestModel().spec, GoodRankRequest(),
                               {bench::TensorContents::kTyped, true});
}

void SetInt64(ModelInferRequest* request, const std::string& name, std::vector<int64_t> shape,
              std::vector<int64_t> values) {
  auto* input = Reset(request, name, "INT64", shape);
  for (int64_t v : values) input->mutable_contents()->add_int64_contents(v);
}

void SetInt32(ModelInferRequest* request, const std::string& name, std::vector<int64_t> shape,
              std::vector<int32_t> values) {
  auto* input = Reset(request, name, "INT32", shape);
  for (int32_t v : values) input->mutable_contents()->add_int_contents(v);
}

void SetFp32(ModelInferRequest* request, const std::string& name, std::vector<int64_t> shape,
             std::vector<float> values) {
  auto* input = Reset(request, name, "FP32", shape);
  for (float v : values) input->mutable_contents()->add_fp32_contents(v);
}

void RemoveInput(ModelInferRequest* request, const std::string& name) {
  auto* inputs = request->mutable_inputs();
  for (int i = 0; i < inputs->size(); ++i) {
    if (inputs->Get(i).name() == name) {
      inputs->DeleteSubrange(i, 1);
      return;
    }
  }
}

void ExpectSameBatch(const engine::Batch& a, const engine::Batch& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.candidate_begin, b.candidate_begin);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.user.bag_begin, b.user.bag_begin);
  EXPECT_EQ(a.user.rows, b.user.rows);
  ExpectSameBits(a.user.weights, b.user.weights, "user.weights");
  EXPECT_EQ(a.item.bag_begin, b.item.bag_begin);
  EXPECT_EQ(a.item.rows, b.item.rows);
  ExpectSameBits(a.item.weights, b.item.weights, "item.weights");
  ExpectSameBits(a.user_dense, b.user_dense, "user_dense");
  ExpectSameBits(a.item_dense, b.item_dense, "item_dense");
}

}  // namespace fuserank::testing
