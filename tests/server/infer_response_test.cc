#include "server/infer_response.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::vector<T> Values(const std::string& raw) {
  std::vector<T> out(raw.size() / sizeof(T));
  std::memcpy(out.data(), raw.data(), out.size() * sizeof(T));
  return out;
}

inference::ModelInferRequest AskFor(std::initializer_list<const char*> names) {
  inference::ModelInferRequest request;
  for (const char* name : names) request.add_outputs()->set_name(name);
  return request;
}

TEST(SelectOutputsTest, NoneNamedMeansAllThreeBestFirstOrder) {
  RequestedOutputs selected;
  ASSERT_TRUE(SelectOutputs(AskFor({}).outputs(), "m", &selected).ok());
  ASSERT_EQ(selected.count, 3);
  EXPECT_EQ(selected.outputs[0], Output::kScores);
  EXPECT_EQ(selected.outputs[1], Output::kIndices);
  EXPECT_EQ(selected.outputs[2], Output::kItemIds);
}

TEST(SelectOutputsTest, KeepsTheRequestsOrder) {
  RequestedOutputs selected;
  ASSERT_TRUE(SelectOutputs(AskFor({"item_ids", "scores"}).outputs(), "m", &selected).ok());
  ASSERT_EQ(selected.count, 2);
  EXPECT_EQ(selected.outputs[0], Output::kItemIds);
  EXPECT_EQ(selected.outputs[1], Output::kScores);
}

TEST(SelectOutputsTest, RefusesAnUnknownOrRepeatedName) {
  RequestedOutputs selected;
  const absl::Status unknown =
      SelectOutputs(AskFor({"scores", "logits"}).outputs(), "bench", &selected);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(),
              HasSubstr("outputs[1]: model 'bench' has no output named 'logits'"));
  const absl::Status twice =
      SelectOutputs(AskFor({"indices", "indices"}).outputs(), "bench", &selected);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.message(), HasSubstr("output 'indices' is requested twice"));
}

// tritonclient's InferRequestedOutput(name, class_count=2) asks for Triton's BYTES
// "score:index" labels; answering FP32 scores instead was silent.
TEST(SelectOutputsTest, RefusesClassificationNamingTheOutputAndTopK) {
  for (const int64_t class_count : {2, 0}) {
    SCOPED_TRACE(class_count);
    inference::ModelInferRequest request = AskFor({"item_ids", "scores"});
    (*request.mutable_outputs(1)->mutable_parameters())["classification"].set_int64_param(
        class_count);
    RequestedOutputs selected;
    const absl::Status refused = SelectOutputs(request.outputs(), "m", &selected);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(refused.message(),
                HasSubstr("outputs[1].parameters.classification: output 'scores' has no "
                          "classification form; fuserank returns scores (FP32) and ids only"));
    EXPECT_THAT(refused.message(), HasSubstr("request parameter top_k"));
  }
}

// As request parameters other than top_k: binary_data (which only HTTP reads) and the like.
TEST(SelectOutputsTest, IgnoresOtherOutputParameters) {
  inference::ModelInferRequest request = AskFor({"scores"});
  (*request.mutable_outputs(0)->mutable_parameters())["binary_data"].set_bool_param(true);
  RequestedOutputs selected;
  ASSERT_TRUE(SelectOutputs(request.outputs(), "m", &selected).ok());
  ASSERT_EQ(selected.count, 1);
  EXPECT_EQ(selected.outputs[0], Output::kScores);
}

TEST(FillInferResponseTest, WritesTheSelectedOutputsBestFirst) {
  const std::vector<int64_t> ids = {100, 200, 300};
  const Column<int64_t> item_ids(reinterpret_cast<const char*>(ids.data()), 3);
  const std::vector<engine::ScoredIndex> items = {{2, 0.9F}, {0, 0.5F}};
  RequestedOutputs selected;
  ASSERT_TRUE(SelectOutputs(AskFor({}).outputs(), "m", &selected).ok());
  inference::ModelInferResponse response;
  response.add_outputs()->set_name("left from an earlier call");
  ASSERT_TRUE(FillInferResponse({"m", "7", "req-1"}, selected, items, item_ids, &response).ok());
  EXPECT_EQ(response.model_name(), "m");
  EXPECT_EQ(response.model_version(), "7");
  EXPECT_EQ(response.id(), "req-1");
  ASSERT_EQ(response.outputs_size(), 3);
  ASSERT_EQ(response.raw_output_contents_size(), 3);
  EXPECT_EQ(response.outputs(0).name(), "scores");
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_EQ(response.outputs(0).shape(0), 2);
  EXPECT_EQ(Values<float>(response.raw_output_contents(0)), (std::vector<float>{0.9F, 0.5F}));
  EXPECT_EQ(response.outputs(1).datatype(), "INT32");
  EXPECT_EQ(Values<int32_t>(response.raw_output_contents(1)), (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(response.outputs(2).name(), "item_ids");
  EXPECT_EQ(response.outputs(2).datatype(), "INT64");
  EXPECT_EQ(Values<int64_t>(response.raw_output_contents(2)), (std::vector<int64_t>{300, 100}));
}

TEST(FillInferResponseTest, RefusesAnIndexThatIsNoCandidate) {
  const std::vector<int64_t> ids = {100, 200};
  const Column<int64_t> item_ids(reinterpret_cast<const char*>(ids.data()), 2);
  const std::vector<engine::ScoredIndex> items = {{2, 0.9F}};
  RequestedOutputs selected;
  ASSERT_TRUE(SelectOutputs(AskFor({"scores"}).outputs(), "m", &selected).ok());
  inference::ModelInferResponse response;
  const absl::Status status =
      FillInferResponse({"m", "1", ""}, selected, items, item_ids, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("candidate 2 of a request with 2"));
}

}  // namespace
}  // namespace fuserank::server
