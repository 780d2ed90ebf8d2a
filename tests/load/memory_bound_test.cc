// Memory of the public port is bounded by the config, not by what clients send:
// the real server binary as a child process, three waves of 16 concurrent ~16 MB requests,
// each far over one limit (a run of empty candidates, one candidate with millions of empty
// features, one feature with millions of ids), sent as raw bytes. Every one is refused with
// INVALID_ARGUMENT naming its limit, the server's resident memory stays under idle + 1 GiB
// throughout and is back within idle + 200 MiB a second after the last answer, and a normal
// request still scores right. Plus requests over server.max_request_bytes at several sizes,
// each INVALID_ARGUMENT naming it (gRPC used to answer RESOURCE_EXHAUSTED beyond twice it).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/e2e/server_process_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;
using testing::ServerProcess;

// FUSERANK_SERVER_BINARY overrides it: to run these tests against another build.
std::string ServerBinary() {
  const char* other = std::getenv("FUSERANK_SERVER_BINARY");
  return other != nullptr ? other : FUSERANK_BINARY_DIR "/bin/fuserank-server";
}
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kConcurrent = 16;
constexpr size_t kAttackBytes = 16'000'000;  // under the default 16 MiB server.max_request_bytes

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Field `field`, wire type 2 (length-delimited), holding `payload`.
std::string Delimited(int field, const std::string& payload) {
  std::string out(1, static_cast<char>(field << 3 | 2));
  AppendVarint(payload.size(), &out);
  return out + payload;
}

// RankRequest.candidates (field 4), each empty: 2 bytes per candidate.
std::string EmptyCandidates() {
  std::string out;
  out.reserve(kAttackBytes);
  while (out.size() + 2 <= kAttackBytes) out.append("\x22\x00", 2);
  return out;
}

// One candidate whose features (Candidate field 2) are all empty.
std::string OneCandidateOfEmptyFeatures() {
  std::string features;
  features.reserve(kAttackBytes);
  while (features.size() + 2 <= kAttackBytes - 16) features.append("\x12\x00", 2);
  return Delimited(4, features);
}

// One user feature named user_0 whose packed ids (Feature field 2) are millions of 1s.
std::string OneFeatureOfManyIds() {
  const std::string ids(kAttackBytes - 32, '\x01');
  return Delimited(2, Delimited(1, "user_0") + Delimited(2, ids));
}

struct Answer {
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
};

// Sends `bytes` as the body of `count` concurrent Rank calls and waits for every answer.
std::vector<grpc::Status> SendConcurrently(grpc::GenericStub* stub, const std::string& bytes,
                                           int count) {
  grpc::Slice slice(bytes);
  const grpc::ByteBuffer request(&slice, 1);  // every call shares the one slice
  std::vector<std::unique_ptr<Answer>> answers;
  for (int i = 0; i < count; ++i) {
    auto answer = std::make_unique<Answer>();
    answer->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    Answer* a = answer.get();
    stub->UnaryCall(&a->context, "/fuserank.v1.Ranker/Rank", grpc::StubOptions(), &request,
                    &a->response, [a](grpc::Status status) {
                      a->status = std::move(status);
                      a->done.Notify();
                    });
    answers.push_back(std::move(answer));
  }
  std::vector<grpc::Status> statuses;
  for (auto& answer : answers) {
    EXPECT_TRUE(answer->done.WaitForNotificationWithTimeout(absl::Seconds(180)));
    statuses.push_back(answer->status);
  }
  return statuses;
}

class MemoryBoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(ServerBinary())) << ServerBinary() << " is not built";
    dir_ = testing::TempDir("memory_bound");
    model_ = testing::MakeRandomModel(testing::SmallSpec(2, 3, 1000, 8), 31);
    absl::StatusOr<std::string> path = testing::WriteTestModel(model_, dir_);
    ASSERT_TRUE(path.ok()) << path.status();
    config_ = dir_ + "/server.yaml";
    // Every limit at its default but the ports: what a fresh deployment runs.
    std::ofstream(config_) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"\", "
                              "metrics_listen: \"\"}\nengine: {device: cpu}\n"
                              "model: {path: \""
                           << *path << "\"}\nlogging: {level: info}\n";
    ASSERT_TRUE(server_.Start(ServerBinary(), config_)) << server_.log();
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_.port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = std::make_unique<grpc::GenericStub>(channel_);
  }

  // A normal request scores as the reference says.
  void ExpectAGoodRequestScores(uint64_t seed) {
    auto ranker = v1::Ranker::NewStub(channel_);
    const v1::RankRequest request = testing::RandomRequest(model_, seed, 30);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::RankResponse response;
    const grpc::Status status = ranker->Rank(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const std::vector<double> reference = testing::ReferenceScores(model_, request);
    EXPECT_EQ(response.items_size(), request.candidates_size());
    for (const v1::ScoredItem& item : response.items()) {
      EXPECT_NEAR(item.score(), reference[item.index()], 5e-5);
    }
  }

  std::string dir_;
  testing::TestModel model_;
  std::string config_;
  ServerProcess server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

struct Wave {
  const char* name;
  std::string (*bytes)();
  const char* limit;  // named in every refusal
};

TEST_F(MemoryBoundTest, OverLimitRequestsAreRefusedWithoutGrowingTheServer) {
  ExpectAGoodRequestScores(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t idle = server_.ResidentBytes();
  ASSERT_GT(idle, 0);
  ASSERT_TRUE(server_.ResetPeak());

  std::atomic<bool> sampling{true};
  std::atomic<int64_t> sampled_peak{0};
  std::thread sampler([&] {
    while (sampling.load()) {
      sampled_peak.store(std::max(sampled_peak.load(), server_.ResidentBytes()));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const Wave waves[] = {
      {"empty candidates", &EmptyCandidates, "server.max_candidates (4096)"},
      {"one candidate of empty features", &OneCandidateOfEmptyFeatures, "item-side tables"},
      {"one feature of many ids", &OneFeatureOfManyIds, "server.max_ids_per_feature (1024)"},
  };
  for (const Wave& wave : waves) {
    SCOPED_TRACE(wave.name);
    const std::string bytes = wave.bytes();
    for (const grpc::Status& status : SendConcurrently(stub_.get(), bytes, kConcurrent)) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr(wave.limit));
    }
  }
  const auto last_answer = std::chrono::steady_clock::now();
  std::this_thread::sleep_until(last_answer + std::chrono::seconds(1));
  sampling.store(false);
  sampler.join();
  const int64_t after = server_.ResidentBytes();
  const int64_t peak = std::max(server_.PeakResidentBytes(), sampled_peak.load());
  std::printf("memory: idle %.1f MiB, peak %.1f MiB, 1 s after the last answer %.1f MiB\n",
              idle / double(kMiB), peak / double(kMiB), after / double(kMiB));
  EXPECT_LT(peak, idle + 1024 * kMiB);
  EXPECT_LT(after, idle + 200 * kMiB);
  ExpectAGoodRequestScores(2);
}

TEST_F(MemoryBoundTest, EveryRequestOverTheByteLimitIsInvalidArgumentNamingIt) {
  // The default limit is 16 MiB: just over it, twice it and four times it.
  for (const size_t bytes : {size_t{16 * kMiB + 1}, size_t{33 * kMiB}, size_t{64 * kMiB}}) {
    SCOPED_TRACE(absl::StrCat(bytes, " bytes"));
    // A request_id (field 1) that long: valid protobuf, only too large.
    const std::string request = Delimited(1, std::string(bytes - 5, 'x'));
    for (const grpc::Status& status : SendConcurrently(stub_.get(), request, 2)) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
      EXPECT_THAT(status.error_message(),
                  HasSubstr("more than server.max_request_bytes (16777216)"));
    }
  }
  ExpectAGoodRequestScores(3);
}

}  // namespace
}  // namespace fuserank
