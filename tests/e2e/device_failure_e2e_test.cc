// A backend whose device fails after start, injected into the real server
// (ServerHooks::create_backend): with engine.on_device_failure fail, the model's Rank and
// ModelInfer calls get UNAVAILABLE naming the device and the error, health turns
// NOT_SERVING, ModelReady false and RepositoryIndex UNAVAILABLE, and the failure is
// counted; with cpu, the model goes on serving and scores exactly as the CPU engine did
// before the fault.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <climits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/kserve/infer_request.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/device_fault.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/config.h"
#include "server/model_warmup.h"
#include "server/server.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/kserve_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

constexpr char kDevice[] = "fake:0";
constexpr char kFault[] =
    "batch on the GPU: cudaErrorIllegalAddress (an illegal memory access was encountered)";

// When the fake device fails: from its fail_from-th Run() on (counting from 0).
struct FaultPlan {
  std::atomic<int> runs{0};
  std::atomic<int> fail_from{INT_MAX};
  void FailNextBatch() { fail_from.store(runs.load()); }
};

// The CPU engine on a "device" that faults as the CUDA backend does: the batch that meets
// the fault gets the marked error, every later one the backend's failed status.
class FaultyBackend final : public engine::Backend {
 public:
  FaultyBackend(std::unique_ptr<engine::Backend> cpu, std::shared_ptr<FaultPlan> plan)
      : cpu_(std::move(cpu)), plan_(std::move(plan)) {}
  std::string device() const override { return kDevice; }
  int num_workers() const override { return cpu_->num_workers(); }
  absl::Status Run(int worker, const engine::Batch& batch, engine::BatchResult* result) override {
    if (failed_.load()) return health();
    if (plan_->runs.fetch_add(1) < plan_->fail_from.load()) {
      return cpu_->Run(worker, batch, result);
    }
    result->result_begin.push_back(7);  // a partial result, as a failed device may leave
    failed_.store(true);
    return engine::MarkDeviceFault(absl::InternalError(kFault),
                                   engine::cuda_error::kIllegalAddress);
  }
  absl::Status health() const override {
    if (!failed_.load()) return absl::OkStatus();
    return engine::DeviceFailedStatus(
        kDevice,
        engine::MarkDeviceFault(absl::InternalError(kFault), engine::cuda_error::kIllegalAddress));
  }

 private:
  std::unique_ptr<engine::Backend> cpu_;
  std::shared_ptr<FaultPlan> plan_;
  std::atomic<bool> failed_{false};
};

class DeviceFailureE2eTest : public ::testing::Test {
 protected:
  void Start(const std::string& on_failure) {
    model_ = testing::MakeRandomModel(testing::SmallSpec(2, 2, 200, 8), 41);
    model_.spec.name = "ranker";
    dir_ = testing::TempDir(absl::StrCat("device_failure_", on_failure));
    absl::StatusOr<std::string> path = testing::WriteTestModel(model_, dir_);
    ASSERT_TRUE(path.ok()) << path.status();
    std::string yaml = absl::StrCat(
        "server:\n  listen: \"127.0.0.1:0\"\n  admin_listen: \"\"\n  metrics_listen: \"\"\n"
        "  max_candidates: 64\n  shutdown_grace_seconds: 2\n"
        "engine: {device: auto, streams: 2",
        on_failure.empty() ? "" : absl::StrCat(", on_device_failure: ", on_failure),
        "}\nmodels:\n  - {name: ranker, path: \"", *path, "\"}\n");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "device_failure.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    server::ServerHooks hooks;
    std::shared_ptr<FaultPlan> plan = plan_;
    hooks.create_backend = [plan](std::shared_ptr<const engine::Model> model, engine::DeviceChoice,
                                  const engine::BackendOptions& options)
        -> absl::StatusOr<std::unique_ptr<engine::Backend>> {
      return std::make_unique<FaultyBackend>(engine::CreateCpuBackend(std::move(model), options),
                                             plan);
    };
    absl::StatusOr<std::unique_ptr<server::Server>> started = server::Server::Start(*config, hooks);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    rank_ = v1::Ranker::NewStub(channel_);
    infer_ = inference::GRPCInferenceService::NewStub(channel_);
  }

  v1::RankRequest Request(uint64_t seed) const {
    v1::RankRequest request = testing::RandomRequest(model_, seed, 20);
    request.set_model("ranker");
    return request;
  }

  testing::InferReply Infer(const v1::RankRequest& request) {
    inference::ModelInferRequest infer = bench::ToInferRequest(
        model_.spec, request, bench::InferRequestOptions{bench::TensorContents::kRaw, false});
    infer.set_model_name("ranker");
    return testing::Infer(infer_.get(), infer);
  }

  inference::RepositoryIndexResponse RepositoryIndex(bool ready_only) {
    grpc::ClientContext context;
    inference::RepositoryIndexRequest request;
    request.set_ready(ready_only);
    inference::RepositoryIndexResponse response;
    const grpc::Status status = infer_->RepositoryIndex(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  int Health(const std::string& service) {
    absl::StatusOr<int> health = testing::HealthCheck(channel_, service);
    EXPECT_TRUE(health.ok()) << health.status();
    return health.ok() ? *health : -1;
  }

  testing::TestModel model_;
  std::string dir_;  // the model's files: the model roots
  std::shared_ptr<FaultPlan> plan_ = std::make_shared<FaultPlan>();
  std::unique_ptr<server::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ranker::Stub> rank_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> infer_;
};

// The fuserank_model_info series in Prometheus text, one line each.
std::string ModelInfoLines(const std::string& text) {
  std::string lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "fuserank_model_info{")) absl::StrAppend(&lines, line, "\n");
  }
  return lines;
}

constexpr int kServing = 1;
constexpr int kNotServing = 2;
const char* const kServices[] = {"", "fuserank.v1.Ranker", "inference.GRPCInferenceService"};

TEST_F(DeviceFailureE2eTest, FailByDefaultAnswersUnavailableAndTurnsHealthNotServing) {
  Start("");  // engine.on_device_failure: fail is the default
  ASSERT_NE(server_, nullptr);
  const v1::RankRequest request = Request(1);
  testing::ExpectMatchesReference(model_, request, testing::Rank(rank_.get(), request));
  for (const char* service : kServices) EXPECT_EQ(Health(service), kServing) << service;

  plan_->FailNextBatch();
  for (int i = 0; i < 3; ++i) {  // the batch that met the fault, then every later one
    const testing::Reply reply = testing::Rank(rank_.get(), request);
    EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(reply.status.error_message(), HasSubstr("model 'ranker'"));
    EXPECT_THAT(reply.status.error_message(), HasSubstr(absl::StrCat("device ", kDevice)));
    EXPECT_THAT(reply.status.error_message(), HasSubstr("cudaErrorIllegalAddress"));
  }
  const testing::InferReply infer = Infer(request);
  EXPECT_EQ(infer.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(infer.status.error_message(), HasSubstr("cudaErrorIllegalAddress"));
  for (const char* service : kServices) EXPECT_EQ(Health(service), kNotServing) << service;
  grpc::ClientContext ready_context;
  inference::ServerReadyResponse server_ready;
  ASSERT_TRUE(infer_->ServerReady(&ready_context, {}, &server_ready).ok());
  EXPECT_FALSE(server_ready.ready());
  grpc::ClientContext model_context;
  inference::ModelReadyRequest model_request;
  model_request.set_name("ranker");
  inference::ModelReadyResponse model_ready;
  ASSERT_TRUE(infer_->ModelReady(&model_context, model_request, &model_ready).ok());
  EXPECT_FALSE(model_ready.ready());
  EXPECT_THAT(server_->metrics().Scrape(),
              HasSubstr("fuserank_backend_failures_total{device=\"fake:0\",model=\"ranker\"} 1"));
}

// RepositoryIndex said READY for a failed model while ModelReady said not ready.
TEST_F(DeviceFailureE2eTest, RepositoryIndexListsAFailedModelUnavailableWithTheFault) {
  Start("fail");
  ASSERT_NE(server_, nullptr);
  inference::RepositoryIndexResponse index = RepositoryIndex(false);
  ASSERT_EQ(index.models_size(), 1);
  EXPECT_EQ(index.models(0).name(), "ranker");
  EXPECT_EQ(index.models(0).state(), "READY");
  EXPECT_EQ(index.models(0).reason(), "");
  EXPECT_EQ(RepositoryIndex(true).models_size(), 1);

  plan_->FailNextBatch();
  EXPECT_EQ(testing::Rank(rank_.get(), Request(3)).status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
  index = RepositoryIndex(false);
  ASSERT_EQ(index.models_size(), 1);
  EXPECT_EQ(index.models(0).name(), "ranker");
  EXPECT_EQ(index.models(0).state(), "UNAVAILABLE");
  EXPECT_THAT(index.models(0).reason(), HasSubstr(absl::StrCat("device ", kDevice)));
  EXPECT_THAT(index.models(0).reason(), HasSubstr("cudaErrorIllegalAddress"));
  EXPECT_EQ(RepositoryIndex(true).models_size(), 0) << "ready: only the models ready to score";
}

TEST_F(DeviceFailureE2eTest, AReloadedHealthyVersionServesAgain) {
  Start("fail");
  ASSERT_NE(server_, nullptr);
  const v1::RankRequest request = Request(2);
  plan_->FailNextBatch();
  EXPECT_EQ(testing::Rank(rank_.get(), request).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Health("fuserank.v1.Ranker"), kNotServing);

  plan_->fail_from.store(INT_MAX);  // the new version's device works
  absl::StatusOr<server::ReloadResult> reloaded = server_->mutable_models().Reload("ranker", "");
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  for (const char* service : kServices) EXPECT_EQ(Health(service), kServing) << service;
  testing::ExpectMatchesReference(model_, request, testing::Rank(rank_.get(), request));
}

TEST_F(DeviceFailureE2eTest, CpuServesOnTheCpuEngineWithTheSameScores) {
  Start("cpu");
  ASSERT_NE(server_, nullptr);
  std::vector<v1::RankRequest> requests;
  std::vector<v1::RankResponse> before;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    requests.push_back(Request(seed));
    const testing::Reply reply = testing::Rank(rank_.get(), requests.back());
    ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
    before.push_back(reply.response);
  }
  const testing::InferReply infer_before = Infer(requests[0]);
  ASSERT_TRUE(infer_before.status.ok()) << infer_before.status.error_message();

  plan_->FailNextBatch();
  for (size_t i = 0; i < requests.size(); ++i) {  // the first meets the fault: scored again
    SCOPED_TRACE(absl::StrCat("request ", i));
    const testing::Reply reply = testing::Rank(rank_.get(), requests[i]);
    ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
    ASSERT_EQ(reply.response.items_size(), before[i].items_size());
    for (int k = 0; k < reply.response.items_size(); ++k) {
      EXPECT_EQ(reply.response.items(k).item_id(), before[i].items(k).item_id());
      EXPECT_EQ(reply.response.items(k).score(), before[i].items(k).score());  // bit for bit
    }
  }
  const testing::InferReply infer_after = Infer(requests[0]);
  ASSERT_TRUE(infer_after.status.ok()) << infer_after.status.error_message();
  const testing::InferOutputs a = testing::ReadOutputs(infer_before.response);
  const testing::InferOutputs b = testing::ReadOutputs(infer_after.response);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.item_ids, b.item_ids);
  EXPECT_GT(plan_->runs.load(), plan_->fail_from.load());  // the fake did fail
  for (const char* service : kServices) EXPECT_EQ(Health(service), kServing) << service;
  grpc::ClientContext ready_context;
  inference::ServerReadyResponse server_ready;
  ASSERT_TRUE(infer_->ServerReady(&ready_context, {}, &server_ready).ok());
  EXPECT_TRUE(server_ready.ready());
  const std::string metrics = server_->metrics().Scrape();
  EXPECT_THAT(metrics,
              HasSubstr("fuserank_backend_failures_total{device=\"fake:0\",model=\"ranker\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("device=\"cpu\""));  // fuserank_model_info moved to the CPU
}

// A request still finishing on a retired version meets the fault after the reload. The
// version's fuserank_model_info series went with the reload: the failure must neither bring
// back one for the retired version (1, retired by version 2) nor replace the serving
// version's when both carry the same labels (2, reloaded from the same spec).
TEST_F(DeviceFailureE2eTest, AFaultOnARetiredVersionLeavesTheModelInfoOfTheServingOneAlone) {
  Start("cpu");
  ASSERT_NE(server_, nullptr);
  server::ServedModels& models = server_->mutable_models();
  testing::TestModel next = model_;
  next.spec.name = "ranker_v2";
  next.spec.version = "2";
  absl::StatusOr<std::string> v2 = testing::WriteTestModel(next, dir_);  // in the roots
  ASSERT_TRUE(v2.ok()) << v2.status();
  for (const std::string& reload_from : {*v2, std::string()}) {  // "": the same spec again
    SCOPED_TRACE(reload_from.empty() ? "the same labels" : "another version");
    const server::ModelHandle retired = *models.Acquire("ranker");
    absl::StatusOr<server::ReloadResult> reloaded = models.Reload("ranker", reload_from);
    ASSERT_TRUE(reloaded.ok()) << reloaded.status();
    plan_->FailNextBatch();
    engine::BatchResult result;
    EXPECT_TRUE(retired->backend->Run(0, server::SyntheticBatch(retired->model, 4), &result).ok());
    plan_->fail_from.store(INT_MAX);
    ASSERT_EQ(retired->backend->device(), "cpu") << "the retired version met no fault";
    EXPECT_EQ(ModelInfoLines(server_->metrics().Scrape()),
              R"(fuserank_model_info{device="fake",model="ranker",version="2"} 1)"
              "\n");
  }
}

}  // namespace
}  // namespace fuserank
