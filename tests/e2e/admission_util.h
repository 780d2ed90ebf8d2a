// Helpers of the admission end-to-end suites (admission_e2e_test.cc,
// refusal_codes_e2e_test.cc): one real server in-process on 127.0.0.1:0 serving a model
// slow enough to keep calls in flight, and asynchronous Rank calls. Test helpers; not
// thread-safe.
#ifndef FUSERANK_TESTS_E2E_ADMISSION_UTIL_H_
#define FUSERANK_TESTS_E2E_ADMISSION_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "server/server.h"
#include "tests/testing/test_model.h"

namespace fuserank::testing {

struct Started {
  TestModel model;
  std::unique_ptr<server::Server> server;
  std::shared_ptr<grpc::Channel> channel;
};

// A model slow enough (a top MLP `width` wide) that calls stay in flight for a while,
// served by one CPU worker. `server_keys` and `engine_keys` are added to the config's
// server and engine sections (flow style: "key: value, ..."). A failure to start is a
// test failure and leaves `server` null.
Started StartAdmissionServer(const std::string& name, const std::string& server_keys,
                             int width = 512, const std::string& engine_keys = "");

// One asynchronous Rank call.
struct AsyncCall {
  grpc::ClientContext context;
  v1::RankRequest request;
  v1::RankResponse response;
  grpc::Status status;
  absl::Notification done;
};

// Starts `call` (its request and context already set) on `stub`.
void StartRank(v1::Ranker::Stub* stub, AsyncCall* call);

// The sample of fuserank_requests_total{rpc=`rpc`,code=`code`} in `scrape` (0 when absent).
double RequestCount(const std::string& scrape, const std::string& rpc, const std::string& code);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_ADMISSION_UTIL_H_
