#include "tests/load/load_server_util.h"

#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/grpc_status.h"
#include "tests/e2e/grpc_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"

namespace fuserank::testing {

TestModel LoadModel(uint64_t seed, std::vector<int> top_mlp) {
  engine::ModelSpec spec = SmallSpec(2, 3, 5000, 32);
  spec.name = "load";
  spec.top_mlp = std::move(top_mlp);
  return MakeRandomModel(spec, seed);
}

v1::RankRequest RequestOf(const TestModel& model, uint64_t seed, int candidates) {
  for (uint64_t s = seed;; s += 1000003) {
    v1::RankRequest request = RandomRequest(model, s, 2 * candidates);
    if (request.candidates_size() < candidates) continue;
    request.mutable_candidates()->DeleteSubrange(candidates,
                                                 request.candidates_size() - candidates);
    return request;
  }
}

Started StartServer(const std::string& model_path, const std::string& engine, int max_candidates,
                    const std::string& name) {
  absl::StatusOr<server::Config> config = server::ParseConfig(
      absl::StrCat("server: {listen: \"127.0.0.1:0\", admin_listen: \"\", metrics_listen: \"\", ",
                   "max_candidates: ", max_candidates, ", shutdown_grace_seconds: 30}\n",
                   "engine: ", engine, "\nmodel: {path: \"", model_path, "\"}\n"),
      name);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return {};
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->port());
  return {std::move(*server), target};
}

std::string LoadEngineConfig() {
  return absl::StrCat("{device: cpu, streams: ", kStreams, ", queue_capacity: ", kQueueCapacity,
                      ", max_batch_candidates: ", kMaxBatchCandidates, ", max_batch_wait_us: 200}");
}

Workload PrepareWorkload(const TestModel& model, const std::string& target) {
  Workload workload;
  auto stub = v1::Ranker::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 64; ++i) {
    workload.requests.push_back(RequestOf(model, 100 + i, kCandidates));
    const Reply reply = Rank(stub.get(), workload.requests.back());
    ExpectMatchesReference(model, workload.requests.back(), reply);
    workload.expected.push_back(reply.response.SerializeAsString());
  }
  std::vector<double> seconds;
  for (int i = 0; i < 60; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const Reply reply = Rank(stub.get(), workload.requests[i]);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EXPECT_TRUE(reply.status.ok()) << reply.status.error_message();
  }
  workload.single_seconds = Percentile(seconds, 0.5);
  return workload;
}

std::map<grpc::StatusCode, int> CountCodes(const std::vector<CallSample>& samples) {
  std::map<grpc::StatusCode, int> counts;
  for (const CallSample& sample : samples) ++counts[sample.code];
  return counts;
}

std::string Describe(const std::map<grpc::StatusCode, int>& counts) {
  std::string out;
  for (const auto& [code, count] : counts) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", server::GrpcCodeName(code), " ", count);
  }
  return out;
}

void SendSlow(const TestModel& model, v1::Ranker::Stub* stub, const server::Server& server,
              std::vector<AsyncCall>* calls, int queued) {
  for (size_t i = 0; i < calls->size(); ++i) {
    (*calls)[i].request = RequestOf(model, 500 + i, kSlowCandidates);
    (*calls)[i].Send(stub, std::chrono::seconds(60));
  }
  // They arrive one by one as the server reads them.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (server.models().QueueDepth() < queued && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_GE(server.models().QueueDepth(), queued) << "the slow requests never queued";
}

}  // namespace fuserank::testing
