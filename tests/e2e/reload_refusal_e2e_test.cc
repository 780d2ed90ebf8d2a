// Reloads that must be refused, through the real server's Admin ReloadModel: paths outside
// the model roots (directly, through a symlink, through "..", or a spec whose weights lie
// outside), files that are no regular files (/dev/zero, a device, a FIFO, a directory) or
// that are missing, and a model whose memory needs exceed the budget (a linear cross whose
// fold would take terabytes). Each answers at once with the reason while the old version
// keeps serving, and blocks neither Rank, nor hot-row changes, nor the file watch. Admin
// calls run on bounded workers: a burst of reloads starts no thread per call.
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/admin.grpc.pb.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

namespace fs = std::filesystem;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::TestModel;

TestModel Version(const std::string& version, uint64_t seed) {
  engine::ModelSpec spec = testing::SmallSpec(1, 1, 100, 8);
  spec.name = "rank";
  spec.version = version;
  spec.weights_path = "rank.safetensors";
  return testing::MakeRandomModel(spec, seed);
}

int ThreadCount() {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (const dirent* entry = ::readdir(dir)) n += entry->d_name[0] != '.';
  ::closedir(dir);
  return n;
}

class ReloadRefusalE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir(absl::StrCat(
        "reload_refusal_", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    live_ = dir_ + "/live";
    ASSERT_TRUE(testing::WriteTestModel(Version("v1", 1), live_).ok());
    ASSERT_TRUE(testing::WriteTestModel(Version("v2", 2), dir_ + "/outside").ok());
    ASSERT_TRUE(testing::WriteTestModel(Version("v2", 2), live_ + "/v2").ok());
  }

  void Start(const std::string& model_section) {
    const std::string yaml = absl::StrCat(
        "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", metrics_listen: \"\", "
        "shutdown_grace_seconds: 2}\n"
        "engine: {device: cpu, streams: 1, max_batch_candidates: 4096}\n"
        "model: {path: \"",
        live_, "/rank.yaml\", watch_interval_seconds: 1", model_section, "}\n");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "refusal.yaml");
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

  // ReloadModel with a deadline far above what a refusal takes: a hang shows up as
  // DEADLINE_EXCEEDED, not as a stuck test.
  grpc::Status Reload(const std::string& path) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::ReloadModelRequest request;
    request.set_path(path);
    v1::ReloadModelResponse response;
    return admin_->ReloadModel(&context, request, &response);
  }

  grpc::Status SetHotRows() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::SetHotRowsRequest request;
    v1::TableHotRows* table = request.add_tables();
    table->set_table("item_0");
    table->add_ids(3);
    v1::HotRowsStatus response;
    return admin_->SetHotRows(&context, request, &response);
  }

  std::string Serving() { return (*server_->models().Acquire("rank"))->version(); }

  // Expects `path` refused with a reason naming `why`, v1 serving on.
  void ExpectRefused(const std::string& path, const std::string& why) {
    SCOPED_TRACE(path);
    const grpc::Status status = Reload(path);
    EXPECT_THAT(status.error_code(),
                AnyOf(grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_THAT(status.error_message(), HasSubstr("version 'v1' keeps serving"));
    EXPECT_THAT(status.error_message(), HasSubstr(why));
    EXPECT_EQ(Serving(), "v1");
  }

  // A copy of the v2 spec in live/ whose weights line is `weights`.
  std::string SpecWithWeights(const std::string& name, const std::string& weights) {
    engine::ModelSpec spec = Version("v2", 2).spec;
    spec.weights_path = weights;
    std::string yaml = engine::ModelSpecToYaml(spec);
    const std::string file_name = fs::path(weights).filename().string();
    yaml.replace(yaml.find(file_name), file_name.size(), weights);  // keep the full path
    const std::string path = absl::StrCat(live_, "/", name);
    std::ofstream(path) << yaml;
    return path;
  }

  std::string dir_, live_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<v1::Ranker::Stub> ranker_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

TEST_F(ReloadRefusalE2eTest, FilesThatAreNoRegularFilesAreRefusedAtOnceBlockingNothing) {
  Start(", roots: [\"" + dir_ + "/live\", /dev]");  // /dev is a root: only the file type refuses
  const std::string fifo = live_ + "/fifo.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string weights_fifo = live_ + "/fifo.safetensors";
  ASSERT_EQ(::mkfifo(weights_fifo.c_str(), 0600), 0);
  fs::create_directories(live_ + "/dir.yaml");

  std::atomic<bool> stop{false};
  std::atomic<int> served{0}, failed{0};
  std::thread traffic([&] {  // Rank and hot-row changes all the while
    const TestModel v1 = Version("v1", 1);
    for (int i = 0; !stop.load(); ++i) {
      const testing::Reply reply = testing::Rank(ranker_.get(), testing::RandomRequest(v1, i, 8));
      const grpc::Status hot = SetHotRows();
      (reply.status.ok() && hot.ok() ? served : failed).fetch_add(1);
    }
  });
  ExpectRefused("/dev/zero", "'/dev/zero' is a character device, not a regular file");
  ExpectRefused("/dev/null", "'/dev/null' is a character device, not a regular file");
  ExpectRefused(fifo, "is a FIFO, not a regular file");
  ExpectRefused(live_ + "/dir.yaml", "is a directory, not a regular file");
  ExpectRefused(live_ + "/missing.yaml", "cannot be resolved");
  ExpectRefused(SpecWithWeights("zero_weights.yaml", "/dev/zero"),
                "weights '/dev/zero' is a character device, not a regular file");
  ExpectRefused(SpecWithWeights("fifo_weights.yaml", weights_fifo), "is a FIFO");
  // The file watch is not held up either: a new version installed now is picked up.
  for (const char* file : {"rank.safetensors", "rank.yaml"}) {
    fs::copy_file(absl::StrCat(live_, "/v2/", file), absl::StrCat(live_, "/.tmp"),
                  fs::copy_options::overwrite_existing);
    fs::rename(absl::StrCat(live_, "/.tmp"), absl::StrCat(live_, "/", file));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (Serving() != "v2" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Serving(), "v2");
  stop.store(true);
  traffic.join();
  EXPECT_GT(served.load(), 0);
  EXPECT_EQ(failed.load(), 0);
}

TEST_F(ReloadRefusalE2eTest, ReloadPathsAreConfinedToTheModelRoots) {
  Start("");  // roots: the configured model's directory (live/)
  const std::string outside = dir_ + "/outside/rank.yaml";
  ExpectRefused(outside, "is outside the model roots");
  ExpectRefused(live_ + "/../outside/rank.yaml", "is outside the model roots");
  fs::create_symlink(outside, live_ + "/link.yaml");
  ExpectRefused(live_ + "/link.yaml", "is outside the model roots");
  fs::create_directory_symlink(dir_ + "/outside", live_ + "/linkdir");
  ExpectRefused(live_ + "/linkdir/rank.yaml", "is outside the model roots");
  ExpectRefused(SpecWithWeights("escape.yaml", dir_ + "/outside/rank.safetensors"),
                "weights '" + dir_ + "/outside/rank.safetensors' (");
  // Inside the roots: loads.
  const grpc::Status status = Reload(live_ + "/v2/rank.yaml");
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(Serving(), "v2");
}

// interaction: linear with cross_dim 1 and top_mlp [2^20, 1] over 2^20 dense inputs: 12 MB
// of tensors whose fold W_top1 * W_cross is 2^20 x 2^20 floats (4 TiB).
TEST_F(ReloadRefusalE2eTest, AModelThatNeedsMoreMemoryThanTheBudgetIsRefused) {
  Start("");
  engine::ModelSpec spec;
  spec.version = "fold";
  spec.weights_path = "fold.safetensors";
  spec.dense_user = 1 << 20;
  spec.interaction = engine::Interaction::kLinear;
  spec.cross_dim = 1;
  spec.top_mlp = {1 << 20, 1};
  spec.name = "fold";
  TestModel fold = testing::MakeRandomModel(spec, 3);
  ASSERT_TRUE(testing::WriteTestModel(fold, live_).ok());
  ExpectRefused(live_ + "/fold.yaml", "model memory budget (model.memory_budget_bytes)");
  ExpectRefused(live_ + "/fold.yaml", "dense layers 4.0 TiB");
  // And it still scores.
  const testing::Reply reply =
      testing::Rank(ranker_.get(), testing::RandomRequest(Version("v1", 1), 5, 8));
  EXPECT_TRUE(reply.status.ok()) << reply.status.error_message();
}

TEST_F(ReloadRefusalE2eTest, AdminCallsRunOnOneWorkerNotAThreadEach) {
  Start("");
  constexpr int kCalls = 40;
  const int threads_before = ThreadCount();
  grpc::CompletionQueue cq;
  struct Call {
    grpc::ClientContext context;
    v1::ReloadModelRequest request;
    v1::ReloadModelResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ReloadModelResponse>> reader;
  };
  std::vector<Call> calls(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    Call& call = calls[i];
    call.context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    call.request.set_path(live_ + (i % 2 == 0 ? "/v2/rank.yaml" : "/rank.yaml"));
    call.reader = admin_->AsyncReloadModel(&call.context, call.request, &cq);
    call.reader->Finish(&call.response, &call.status, &call);
  }
  int max_threads = ThreadCount();
  int ok = 0, busy = 0;
  for (int done = 0; done < kCalls; ++done) {
    void* tag = nullptr;
    bool fine = false;
    ASSERT_TRUE(cq.Next(&tag, &fine));
    max_threads = std::max(max_threads, ThreadCount());
    const Call* call = static_cast<const Call*>(tag);
    if (call->status.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(call->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
          << call->status.error_message();
      EXPECT_THAT(call->status.error_message(), HasSubstr("the admin service is busy"));
      ++busy;
    }
  }
  std::printf("%d reloads: %d done, %d refused as busy; threads %d -> at most %d\n", kCalls, ok,
              busy, threads_before, max_threads);
  EXPECT_GT(ok, 0);
  EXPECT_LT(max_threads - threads_before, kCalls / 2) << "a thread per admin call?";
}

}  // namespace
}  // namespace fuserank
