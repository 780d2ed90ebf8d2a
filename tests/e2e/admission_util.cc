#include "tests/e2e/admission_util.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "tests/e2e/rank_check_util.h"

namespace fuserank::testing {

Started StartAdmissionServer(const std::string& name, const std::string& server_keys, int width,
                             const std::string& engine_keys) {
  Started started;
  engine::ModelSpec spec = SmallSpec(1, 2, 1000, 16);
  spec.name = name;
  spec.top_mlp = {width, width, 1};
  started.model = MakeRandomModel(spec, 41);
  absl::StatusOr<std::string> path = WriteTestModel(started.model, TempDir(name));
  EXPECT_TRUE(path.ok()) << path.status();
  if (!path.ok()) return started;
  absl::StatusOr<server::Config> config = server::ParseConfig(
      absl::StrCat("server: {listen: \"127.0.0.1:0\", admin_listen: \"\", metrics_listen: \"\", ",
                   server_keys, "}\nengine: {device: cpu, streams: 1, max_queue_delay_ms: 0",
                   engine_keys.empty() ? "" : ", ", engine_keys, "}\n", "model: {path: \"", *path,
                   "\"}\n"),
      name + ".yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return started;
  absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return started;
  started.server = std::move(*server);
  started.channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", started.server->port()),
                                        grpc::InsecureChannelCredentials());
  return started;
}

void StartRank(v1::Ranker::Stub* stub, AsyncCall* call) {
  stub->async()->Rank(&call->context, &call->request, &call->response, [call](grpc::Status s) {
    call->status = std::move(s);
    call->done.Notify();
  });
}

double RequestCount(const std::string& scrape, const std::string& rpc, const std::string& code) {
  const std::string prefix =
      absl::StrCat("fuserank_requests_total{code=\"", code, "\",rpc=\"", rpc, "\"} ");
  const size_t at = scrape.find(prefix);
  return at == std::string::npos ? 0 : std::stod(scrape.substr(at + prefix.size()));
}

}  // namespace fuserank::testing
