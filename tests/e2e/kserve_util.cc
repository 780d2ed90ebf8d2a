#include "tests/e2e/kserve_util.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "tests/e2e/model_spec_util.h"
#include "tests/e2e/rank_check_util.h"

namespace fuserank::testing {
namespace {

template <typename T>
std::vector<T> ReadRaw(const inference::ModelInferResponse& response, const std::string& name,
                       const std::string& datatype) {
  for (int o = 0; o < response.outputs_size(); ++o) {
    const auto& output = response.outputs(o);
    if (output.name() != name) continue;
    EXPECT_EQ(output.datatype(), datatype) << name;
    EXPECT_EQ(output.shape_size(), 1) << name;
    if (o >= response.raw_output_contents_size()) {
      ADD_FAILURE() << name << ": no raw_output_contents";
      return {};
    }
    const std::string& raw = response.raw_output_contents(o);
    EXPECT_EQ(static_cast<int64_t>(raw.size()), output.shape(0) * static_cast<int64_t>(sizeof(T)))
        << name;
    std::vector<T> values(raw.size() / sizeof(T));
    if (!values.empty()) std::memcpy(values.data(), raw.data(), values.size() * sizeof(T));
    return values;
  }
  return {};
}

}  // namespace

std::vector<NamedModel> KServeModels() {
  using engine::DType;
  using engine::Interaction;
  using engine::ModelSpec;
  using engine::Pooling;
  using engine::Side;
  std::vector<NamedModel> models;
  models.push_back({"ranker_a", MakeRandomModel(Dot32Spec("dot32-v2"), 21)});
  models.push_back({"", MakeRandomModel(Concat16Spec("concat16-v2"), 22)});

  ModelSpec linear =
      E2eSpec("linear_nodense", Interaction::kLinear, DType::kBF16, "linear_nodense-v2");
  linear.tables = {E2eTable("user_u", Side::kUser, 300, 5),
                   E2eTable("item_i", Side::kItem, 400, 7, Pooling::kMean)};
  linear.cross_dim = 10;
  linear.top_mlp = {6, 1};
  models.push_back({"linear_nodense", MakeRandomModel(linear, 23)});
  return models;
}

absl::StatusOr<std::unique_ptr<server::Server>> StartKServeServer(
    const std::vector<NamedModel>& models, const std::string& dir) {
  std::string yaml = E2eServerYaml("");
  for (const NamedModel& named : models) {
    absl::StatusOr<std::string> path = WriteTestModel(named.model, dir);
    if (!path.ok()) return path.status();
    absl::StrAppend(&yaml, "  - {", named.name.empty() ? "" : "name: " + named.name + ", ",
                    "path: \"", *path, "\"}\n");
  }
  absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "kserve_e2e.yaml");
  if (!config.ok()) return config.status();
  return server::Server::Start(*config);
}

InferReply Infer(inference::GRPCInferenceService::Stub* stub,
                 const inference::ModelInferRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  InferReply reply;
  reply.status = stub->ModelInfer(&context, request, &reply.response);
  return reply;
}

InferOutputs ReadOutputs(const inference::ModelInferResponse& response) {
  EXPECT_EQ(response.outputs_size(), response.raw_output_contents_size());
  InferOutputs out;
  out.scores = ReadRaw<float>(response, "scores", "FP32");
  out.indices = ReadRaw<int32_t>(response, "indices", "INT32");
  out.item_ids = ReadRaw<int64_t>(response, "item_ids", "INT64");
  return out;
}

}  // namespace fuserank::testing
