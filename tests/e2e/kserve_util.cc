#include "tests/e2e/kserve_util.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/config.h"

namespace fuserank::testing {
namespace {

using engine::Interaction;
using engine::ModelSpec;
using engine::Side;

ModelSpec Spec(const std::string& name, Interaction interaction, engine::DType dtype) {
  ModelSpec spec;
  spec.name = name;
  spec.version = absl::StrCat(name, "-v2");
  spec.weights_path = name + ".safetensors";
  spec.interaction = interaction;
  spec.embedding_dtype = dtype;
  return spec;
}

engine::TableSpec Table(const std::string& name, Side side, int64_t rows, int dim,
                        engine::Pooling pooling = engine::Pooling::kSum,
                        engine::Oov oov = engine::Oov::kModulo) {
  return {name, side, rows, dim, pooling, oov};
}

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
  using engine::Oov;
  using engine::Pooling;
  std::vector<NamedModel> models;
  ModelSpec dot = Spec("dot32", Interaction::kDot, DType::kF32);
  dot.tables = {Table("user_a", Side::kUser, 1000, 8),
                Table("user_b", Side::kUser, 50, 8, Pooling::kSum, Oov::kReject),
                Table("item_a", Side::kItem, 1000, 8, Pooling::kMean),
                Table("item_b", Side::kItem, 200, 8),
                Table("item_c", Side::kItem, 30, 8, Pooling::kSum, Oov::kReject)};
  dot.dense_user = 3;
  dot.dense_item = 2;
  dot.bottom_mlp = {16, 8};
  dot.top_mlp = {16, 8, 1};
  models.push_back({"ranker_a", MakeRandomModel(dot, 21)});

  ModelSpec concat = Spec("concat16", Interaction::kConcat, DType::kF16);
  concat.tables = {Table("item_x", Side::kItem, 500, 4, Pooling::kMean),
                   Table("item_y", Side::kItem, 100, 6)};
  concat.dense_user = 2;
  concat.dense_item = 2;
  concat.top_mlp = {12, 1};
  models.push_back({"", MakeRandomModel(concat, 22)});

  ModelSpec linear = Spec("linear_nodense", Interaction::kLinear, DType::kBF16);
  linear.tables = {Table("user_u", Side::kUser, 300, 5),
                   Table("item_i", Side::kItem, 400, 7, Pooling::kMean)};
  linear.cross_dim = 10;
  linear.top_mlp = {6, 1};
  models.push_back({"linear_nodense", MakeRandomModel(linear, 23)});
  return models;
}

absl::StatusOr<std::unique_ptr<server::Server>> StartKServeServer(
    const std::vector<NamedModel>& models, const std::string& dir) {
  std::string yaml = R"(
server:
  listen: "127.0.0.1:0"
  admin_listen: ""
  metrics_listen: "127.0.0.1:0"
  max_request_bytes: 65536
  max_candidates: 64
  max_ids_per_feature: 8
  shutdown_grace_seconds: 2
engine: {device: cpu, streams: 2, queue_capacity: 64}
models:
)";
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
