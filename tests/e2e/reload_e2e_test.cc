// Several models and reloads through the real server on 127.0.0.1: clients hammer Rank
// while the model's files are replaced (the file watch) and Admin ReloadModel swaps
// versions back and forth; no request fails and every response is scored wholly by the
// version it names (its scores are that version's reference scores, not the other's).
// Broken versions are refused, by the RPC and by the watch, and the old one keeps serving.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/e2e/stdout_capture_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TestModel;

constexpr int kRequests = 24;
constexpr int kMaxCandidates = 16;

TestModel Version(const std::string& name, const std::string& version, uint64_t seed) {
  engine::ModelSpec spec = testing::SmallSpec(2, 2, 200, 8);
  spec.name = name;
  spec.version = version;
  spec.weights_path = name + ".safetensors";
  return testing::MakeRandomModel(spec, seed);
}

struct Tally {
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t unknown_version = 0;
  int64_t wrong_scores = 0;
  std::map<std::string, int64_t> by_version;
  std::string first_problem;

  void Problem(const std::string& what) {
    if (first_problem.empty()) first_problem = what;
  }
};

class ReloadE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir(absl::StrCat(
        "reload_e2e_", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    versions_ = {Version("rank", "rank-v1", 21), Version("rank", "rank-v2", 22)};
    other_ = Version("other", "other-1", 23);
    for (const TestModel& model : versions_) {
      ASSERT_TRUE(testing::WriteTestModel(model, VersionDir(model.spec.version)).ok());
    }
    ASSERT_TRUE(testing::WriteTestModel(other_, dir_ + "/other").ok());
    fs::create_directories(dir_ + "/live");
    Install("rank-v1");

    for (int i = 0; i < kRequests; ++i) {
      requests_.push_back(testing::RandomRequest(versions_[0], 1000 + i, kMaxCandidates));
      for (const TestModel& model : versions_) {
        reference_[model.spec.version].push_back(testing::ReferenceScores(model, requests_[i]));
      }
    }

    const std::string yaml = absl::StrCat(R"(
server:
  listen: "127.0.0.1:0"
  admin_listen: "127.0.0.1:0"
  metrics_listen: ""
  max_candidates: 64
  shutdown_grace_seconds: 5
engine: {device: cpu, streams: 2, queue_capacity: 512, max_batch_candidates: 1024}
model: {watch_interval_seconds: 1, roots: [")",
                                          dir_, R"("]}
models:
  - {name: rank, path: ")",
                                          dir_, R"(/live/rank.yaml", default: true}
  - {path: ")",
                                          dir_, R"(/other/other.yaml"}
)");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "reload_e2e.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<server::Server>> started = server::Server::Start(*config);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    ranker_ = v1::Ranker::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                      grpc::InsecureChannelCredentials()));
    admin_ = v1::Admin::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->admin_port()), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  std::string VersionDir(const std::string& version) { return dir_ + "/" + version; }

  // Puts a version's files in live/ as an operator should: written beside, renamed over.
  void Install(const std::string& version) {
    for (const char* file : {"rank.safetensors", "rank.yaml"}) {
      const std::string tmp = absl::StrCat(dir_, "/live/.", file, ".tmp");
      fs::copy_file(absl::StrCat(VersionDir(version), "/", file), tmp,
                    fs::copy_options::overwrite_existing);
      fs::rename(tmp, absl::StrCat(dir_, "/live/", file));
    }
  }

  grpc::Status Reload(const std::string& model, const std::string& path,
                      v1::ReloadModelResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::ReloadModelRequest request;
    request.set_model(model);
    request.set_path(path);
    return admin_->ReloadModel(&context, request, response);
  }

  std::string Serving(const std::string& model = "rank") {
    return (*server_->models().Acquire(model))->version();
  }

  // Waits up to 20 s for the file watch to put `version` in service.
  bool WaitForVersion(const std::string& version) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (Serving() != version) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  // Rank request `i` for `model` ("" = default), checked against the reference of the
  // version the response names.
  void RankAndCheck(int i, const std::string& model, Tally* tally) {
    v1::RankRequest request = requests_[i];
    request.set_model(model);
    const testing::Reply reply = testing::Rank(ranker_.get(), request);
    if (!reply.status.ok()) {
      ++tally->failed;
      tally->Problem(absl::StrCat("request ", i, ": ", reply.status.error_message()));
      return;
    }
    const std::string& version = reply.response.model_version();
    auto reference = reference_.find(version);
    if (reference == reference_.end()) {
      ++tally->unknown_version;
      tally->Problem(absl::StrCat("request ", i, ": model_version '", version, "'"));
      return;
    }
    const std::vector<double>& scores = reference->second[i];
    const int n = request.candidates_size();
    const int k = request.top_k() == 0 ? n : std::min<int>(request.top_k(), n);
    bool right = reply.response.items_size() == k;
    for (const v1::ScoredItem& item : reply.response.items()) {
      right = right && item.index() < static_cast<uint32_t>(n) &&
              std::abs(item.score() - scores[item.index()]) <= testing::kTolerance;
    }
    if (!right) {
      ++tally->wrong_scores;
      tally->Problem(absl::StrCat("request ", i, ": scores are not those of ", version));
      return;
    }
    ++tally->ok;
    ++tally->by_version[version];
  }

  std::string dir_;
  std::vector<TestModel> versions_;
  TestModel other_;
  std::vector<v1::RankRequest> requests_;
  std::map<std::string, std::vector<std::vector<double>>> reference_;  // version -> request
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<v1::Ranker::Stub> ranker_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

TEST_F(ReloadE2eTest, TheTwoVersionsScoreDifferently) {
  // Otherwise the reload test could not tell a response of one from one of the other.
  for (int i = 0; i < kRequests; ++i) {
    double largest = 0;
    for (size_t c = 0; c < reference_["rank-v1"][i].size(); ++c) {
      largest =
          std::max(largest, std::abs(reference_["rank-v1"][i][c] - reference_["rank-v2"][i][c]));
    }
    EXPECT_GT(largest, 100 * testing::kTolerance) << "request " << i;
  }
}

TEST_F(ReloadE2eTest, RequestPicksAModelByNameEmptyIsTheDefault) {
  Tally tally;
  RankAndCheck(0, "", &tally);
  RankAndCheck(1, "rank", &tally);
  EXPECT_EQ(tally.ok, 2) << tally.first_problem;
  EXPECT_EQ(tally.by_version["rank-v1"], 2);

  v1::RankRequest request = testing::RandomRequest(other_, 7, 4);
  request.set_model("other");
  testing::Reply reply = testing::Rank(ranker_.get(), request);
  testing::ExpectMatchesReference(other_, request, reply);

  request.set_model("nope");
  reply = testing::Rank(ranker_.get(), request);
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(reply.status.error_message(),
              AllOf(HasSubstr("'nope'"), HasSubstr("loaded models: rank, other")));
}

TEST_F(ReloadE2eTest, ReloadUnderLoadFailsNoRequestAndNeverMixesVersions) {
  constexpr int kClients = 4;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0};
  std::vector<Tally> tallies(kClients + 1);
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      for (int n = t; !stop.load(); ++n) {
        RankAndCheck(n % kRequests, n % 2 == 0 ? "rank" : "", &tallies[t]);
        done.fetch_add(1);
      }
    });
  }
  clients.emplace_back([&] {  // the other model is served throughout
    Tally& tally = tallies[kClients];
    for (int n = 0; !stop.load(); ++n) {
      v1::RankRequest request = testing::RandomRequest(other_, 500 + n % 8, 8);
      request.set_model("other");
      const testing::Reply reply = testing::Rank(ranker_.get(), request);
      const std::vector<double> reference = testing::ReferenceScores(other_, request);
      bool right = reply.status.ok() && reply.response.model_version() == "other-1";
      for (const v1::ScoredItem& item : reply.response.items()) {
        right = right && std::abs(item.score() - reference[item.index()]) <= testing::kTolerance;
      }
      right ? ++tally.ok : ++tally.failed;
      if (!right) tally.Problem("model 'other': " + reply.status.error_message());
    }
  });
  auto let_clients_run = [&] {  // 150 more responses, or 30 s
    const int64_t until = done.load() + 150;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (done.load() < until && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_GE(done.load(), until) << "the clients stalled";
  };

  let_clients_run();
  Install("rank-v2");  // the file watch
  EXPECT_TRUE(WaitForVersion("rank-v2"));
  let_clients_run();
  v1::ReloadModelResponse response;
  grpc::Status status = Reload("rank", "", &response);  // the same files again
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model_version(), "rank-v2");
  EXPECT_THAT(response.message(), HasSubstr("bump `version`"));
  let_clients_run();
  Install("rank-v1");
  EXPECT_TRUE(WaitForVersion("rank-v1"));
  let_clients_run();
  status = Reload("", VersionDir("rank-v2") + "/rank.yaml", &response);  // "" = default
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model(), "rank");
  EXPECT_EQ(response.model_version(), "rank-v2");
  let_clients_run();
  status = Reload("rank", dir_ + "/live/rank.yaml", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model_version(), "rank-v1");
  let_clients_run();
  // A broken version under load: refused, v1 keeps serving.
  const std::string broken = dir_ + "/broken";
  fs::create_directories(broken);
  fs::copy(VersionDir("rank-v2"), broken, fs::copy_options::recursive);
  fs::resize_file(broken + "/rank.safetensors", 64);
  status = Reload("rank", broken + "/rank.yaml", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  let_clients_run();
  stop.store(true);
  for (std::thread& client : clients) client.join();

  Tally total;
  for (const Tally& tally : tallies) {
    total.ok += tally.ok;
    total.failed += tally.failed;
    total.unknown_version += tally.unknown_version;
    total.wrong_scores += tally.wrong_scores;
    for (const auto& [version, count] : tally.by_version) total.by_version[version] += count;
    total.Problem(tally.first_problem);
  }
  EXPECT_EQ(total.failed, 0) << total.first_problem;
  EXPECT_EQ(total.unknown_version, 0) << total.first_problem;
  EXPECT_EQ(total.wrong_scores, 0) << total.first_problem;
  EXPECT_GT(total.by_version["rank-v1"], 0);
  EXPECT_GT(total.by_version["rank-v2"], 0);
  EXPECT_EQ(Serving(), "rank-v1");
  std::printf("reload under load: %lld responses (%lld rank-v1, %lld rank-v2)\n",
              static_cast<long long>(total.ok), static_cast<long long>(total.by_version["rank-v1"]),
              static_cast<long long>(total.by_version["rank-v2"]));
}

TEST_F(ReloadE2eTest, ARetiredVersionIsFreedOnceItsRequestsFinish) {
  Tally tally;
  RankAndCheck(0, "rank", &tally);
  std::weak_ptr<const engine::Model> v1 = (*server_->models().Acquire("rank"))->model;
  v1::ReloadModelResponse response;
  const grpc::Status status = Reload("rank", VersionDir("rank-v2") + "/rank.yaml", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  RankAndCheck(1, "rank", &tally);
  EXPECT_EQ(tally.by_version["rank-v1"], 1);
  EXPECT_EQ(tally.by_version["rank-v2"], 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // The model expires when its last holder lets go; the reaper counts the version once it
  // has destroyed all of it (the weights copy last), a moment later.
  while ((!v1.expired() || server_->models().versions_freed() < 1) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(v1.expired()) << "rank-v1 is still alive after its last request finished";
  EXPECT_EQ(server_->models().versions_freed(), 1);
}

TEST_F(ReloadE2eTest, BrokenVersionsAreRefusedAndTheOldOneKeepsServing) {
  const std::string broken = dir_ + "/broken";
  fs::create_directories(broken);
  fs::copy(VersionDir("rank-v2"), broken, fs::copy_options::recursive);
  fs::resize_file(broken + "/rank.safetensors", fs::file_size(broken + "/rank.safetensors") - 8);
  v1::ReloadModelResponse response;
  grpc::Status status = Reload("rank", broken + "/rank.yaml", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("is refused"), HasSubstr("version 'rank-v1' keeps serving"),
                    HasSubstr("rank.safetensors")));

  status = Reload("rank", dir_ + "/nowhere.yaml", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("nowhere.yaml"));
  status = Reload("nope", "", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);

  // The file watch: a truncated file renamed into place is refused too. Its refusal is
  // only seen in the log (ModelWatcher::refused() is the server's own): wait for that line.
  constexpr char kWatchRefused[] = "(the file watch retries when the files change again)";
  {
    testing::StdoutCapture log(dir_ + "/watch_log.txt");
    const std::string tmp = dir_ + "/live/.tmp";
    fs::copy_file(broken + "/rank.safetensors", tmp);
    fs::rename(tmp, dir_ + "/live/rank.safetensors");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (testing::LineWith(log.Text(), kWatchRefused).empty() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const std::string text = log.Stop();
    const std::string refusal = testing::LineWith(text, kWatchRefused);
    ASSERT_FALSE(refusal.empty())
        << "the file watch did not refuse the truncated weights within 60 s; the log:\n"
        << text;
    EXPECT_THAT(refusal,
                AllOf(HasSubstr("rank.safetensors"), HasSubstr("version 'rank-v1' keeps serving")));
  }
  EXPECT_EQ(Serving(), "rank-v1");

  Tally tally;
  for (int i = 0; i < kRequests; ++i) RankAndCheck(i, "rank", &tally);
  EXPECT_EQ(tally.ok, kRequests) << tally.first_problem;
  EXPECT_EQ(tally.by_version["rank-v1"], kRequests);

  Install("rank-v2");  // a good version afterwards is picked up
  EXPECT_TRUE(WaitForVersion("rank-v2"));
}

}  // namespace
}  // namespace fuserank
