// fuserank-server --check-config refuses what start refuses that can be checked without
// serving, with the message start gives (file, key, reason) and exit code 1: a token file
// others can read or larger than the limit, a token in clear text on a public admin
// address, a model outside model.roots, a root that is no directory, a model over the
// memory budget (counting its hot-row cache), two models served under one name, a config
// path that is a directory, and engine.device: cuda without a usable GPU. And the command
// line itself: --help, and what a bad one is told.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend_factory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/server_process_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

using testing::kServerBinary;
using testing::ServerRun;

// Runs the binary with `flag` ("--check-config" or "--config") on `config`. With
// "--config" a config that passes every check would serve: tests only start refused ones.
ServerRun RunServer(const std::string& flag, const std::string& config) {
  return testing::RunServerToExit(flag + " " + config);
}

class CheckConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kServerBinary)) << kServerBinary << " is not built";
    dir_ = absl::StrCat(::testing::TempDir(), "/check_config_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    engine::ModelSpec spec = testing::SmallSpec(1, 1, 5000, 16);
    spec.name = "m";
    spec.weights_path = "m.safetensors";
    absl::StatusOr<std::string> path =
        testing::WriteTestModel(testing::MakeRandomModel(spec, 1), dir_ + "/models");
    ASSERT_TRUE(path.ok()) << path.status();
    model_ = *path;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A config serving the test model, with `server` and `model` keys added.
  std::string Config(const std::string& server, const std::string& model) {
    const std::string path = dir_ + "/config.yaml";
    std::ofstream(path) << "server: {listen: \"127.0.0.1:0\", metrics_listen: \"\"" << server
                        << "}\nengine: {device: cpu, streams: 1}\nmodel: {path: \"" << model_
                        << "\"" << model << "}\n";
    return path;
  }
  std::string Token(const std::string& text, mode_t mode) {
    const std::string path = dir_ + "/token";
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }

  // Expects both --check-config and --config to refuse `config` with `why`.
  void ExpectRefused(const std::string& config, const std::string& why) {
    const ServerRun checked = RunServer("--check-config", config);
    EXPECT_EQ(checked.exit_code, 1) << checked.output;
    EXPECT_THAT(checked.output, HasSubstr(why));
    const ServerRun started = RunServer("--config", config);
    EXPECT_EQ(started.exit_code, 1) << started.output;
    EXPECT_THAT(started.output, HasSubstr(why));
  }

  std::string dir_, model_;
};

TEST_F(CheckConfigTest, AcceptsWhatStartAccepts) {
  const std::string token = Token("secret\n", 0600);
  const std::string config =
      Config(absl::StrCat(", admin_listen: \"127.0.0.1:0\", admin_token_file: \"", token, "\""),
             absl::StrCat(", roots: [\"", dir_, "/models\"]"));
  const ServerRun outcome = RunServer("--check-config", config);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr("OK"));
}

TEST_F(CheckConfigTest, AcceptsATokenFileOthersCanReadWarningOfIt) {
  const std::string token = Token("secret\n", 0644);
  const std::string config =
      Config(absl::StrCat(", admin_listen: \"127.0.0.1:0\", admin_token_file: \"", token, "\""),
             absl::StrCat(", roots: [\"", dir_, "/models\"]"));
  const ServerRun outcome = RunServer("--check-config", config);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_THAT(outcome.output,
              HasSubstr(absl::StrCat("warning: ", config, ": server.admin_token_file: '", token,
                                     "' can be read by its group or by others (mode 0644)")));
}

TEST_F(CheckConfigTest, RefusesATokenFileOverTheSizeLimit) {
  const std::string token = Token(std::string(5000, 'a'), 0600);
  const std::string config = Config(
      absl::StrCat(", admin_listen: \"127.0.0.1:0\", admin_token_file: \"", token, "\""), "");
  ExpectRefused(config, absl::StrCat(config, ": server.admin_token_file: '", token,
                                     "' is 5000 bytes; a token file holds at most 4096"));
}

TEST_F(CheckConfigTest, RefusesATokenInClearTextOnAPublicAdminAddressWhenToldTo) {
  const std::string token = Token("secret\n", 0600);
  const std::string strict =
      Config(absl::StrCat(", admin_listen: \"0.0.0.0:0\", admin_token_file: \"", token,
                          "\", admin_allow_plaintext_token: false"),
             "");
  ExpectRefused(strict, absl::StrCat(strict,
                                     ": server.admin_listen: '0.0.0.0:0' is not a loopback "
                                     "address and server.tls is off"));
  // By default a token is all a public admin address needs (SPEC section 5), with a
  // warning.
  const std::string plain =
      Config(absl::StrCat(", admin_listen: \"0.0.0.0:0\", admin_token_file: \"", token, "\""), "");
  const ServerRun outcome = RunServer("--check-config", plain);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_THAT(outcome.output, HasSubstr("the admin token travels in clear text"));
}

// engine.device: cuda where the CUDA backend cannot serve (no GPU or driver here, or a
// build without it): both refuse, naming the model and the reason.
TEST_F(CheckConfigTest, RefusesCudaWhereNoGpuIsUsable) {
  const std::string config = dir_ + "/cuda.yaml";
  std::ofstream(config) << "server: {listen: \"127.0.0.1:0\", metrics_listen: \"\"}\n"
                        << "engine: {device: cuda, streams: 1}\nmodel: {path: \"" << model_
                        << "\"}\n";
  // Whether the CUDA backend can serve here is asked in-process, not of the binary under test.
  absl::StatusOr<std::shared_ptr<const engine::Model>> model =
      testing::BuildTestModel(testing::MakeRandomModel(testing::SmallSpec(1, 1, 5000, 16), 1));
  ASSERT_TRUE(model.ok()) << model.status();
  if (engine::CheckCudaCanServe(**model, 0).ok()) {
    GTEST_SKIP() << "the CUDA backend can serve here (a usable GPU): nothing to refuse";
  }
  ExpectRefused(config, absl::StrCat(config, ": model.path '", model_, "': "));
  ExpectRefused(config, "engine.device is cuda: ");
}

TEST_F(CheckConfigTest, RefusesAModelOutsideTheModelRoots) {
  std::filesystem::create_directories(dir_ + "/elsewhere");
  const std::string config =
      Config(", admin_listen: \"\"", absl::StrCat(", roots: [\"", dir_, "/elsewhere\"]"));
  ExpectRefused(config, absl::StrCat(config, ": model.path '", model_, "'"));
  const ServerRun checked = RunServer("--check-config", config);
  EXPECT_THAT(checked.output, HasSubstr("is outside the model roots"));
  EXPECT_THAT(checked.output, HasSubstr("(model.roots)"));
}

TEST_F(CheckConfigTest, RefusesARootThatIsNoDirectory) {
  const std::string config =
      Config(", admin_listen: \"\"", absl::StrCat(", roots: [\"", model_, "\"]"));
  ExpectRefused(config,
                absl::StrCat(config, ": model.roots[0]: '", model_, "' is not a directory"));
}

TEST_F(CheckConfigTest, RefusesTwoModelsWhoseSpecsGiveThemOneName) {
  // Neither entry names its model, so both are served as the spec's "m".
  const std::string path = dir_ + "/two.yaml";
  std::ofstream(path) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"\", metrics_listen: "
                         "\"\"}\nengine: {device: cpu, streams: 1}\n"
                         "models:\n  - {path: \""
                      << model_ << "\"}\n  - {path: \"" << model_ << "\"}\n";
  ExpectRefused(path, absl::StrCat(path, ": models[1].path '", model_,
                                   "': two models are named 'm'; give them distinct names"));
}

TEST_F(CheckConfigTest, AcceptsCudaKeysUnderCpuWarningThatTheyDoNothing) {
  const std::string path = dir_ + "/cpu.yaml";
  std::ofstream(path) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"\", metrics_listen: "
                         "\"\"}\nengine: {device: cpu, streams: 1, gpu: 0, cuda_graphs: true}\n"
                         "model: {path: \""
                      << model_ << "\"}\n";
  const ServerRun checked = RunServer("--check-config", path);
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_THAT(checked.output, HasSubstr(path + ": engine.gpu: has no effect with engine.device: "
                                               "cpu (only the CUDA backend reads it)"));
  EXPECT_THAT(checked.output, HasSubstr(path + ": engine.cuda_graphs: has no effect"));
}

TEST_F(CheckConfigTest, RefusesADirectoryGivenAsTheConfig) {
  ExpectRefused(dir_, absl::StrCat("config '", dir_, "' is a directory, not a regular file"));
}

TEST_F(CheckConfigTest, RefusesAModelOverTheMemoryBudgetCountingItsHotRows) {
  // The version takes under 1 MiB without its hot rows; at cache.hot_rows_per_table 8192
  // (every one of the 5000 rows of both tables, two sets each) it takes over 2.5 MiB.
  const std::string path = dir_ + "/budget.yaml";
  std::ofstream(path) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"\", metrics_listen: "
                         "\"\"}\nengine: {device: cpu, streams: 1, cpu_threads: 1, "
                         "max_batch_candidates: 4096}\n"
                         "cache: {hot_rows_per_table: 8192}\n"
                         "model: {path: \""
                      << model_ << "\", memory_budget_bytes: 2000000}\n";
  ExpectRefused(path, absl::StrCat(path, ": model.path '", model_, "'"));
  const ServerRun checked = RunServer("--check-config", path);
  EXPECT_THAT(checked.output, HasSubstr("of the 1.9 MiB model memory budget "
                                        "(model.memory_budget_bytes)"));
  EXPECT_THAT(checked.output, HasSubstr("hot rows "));
}

// --help prints the usage on stdout and exits 0; a command line that is no command names
// what is wrong, then the usage, and exits 2.
TEST(ServerArgumentsTest, HelpExits0AndABadCommandLineSaysWhatIsWrong) {
  const ServerRun help = testing::RunServerToExit("--help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_THAT(help.output, HasSubstr("usage: fuserank-server --config FILE"));
  EXPECT_THAT(help.output, HasSubstr("--check-config FILE"));
  for (const auto& [args, why] : std::vector<std::pair<std::string, std::string>>{
           {"--bogus", "fuserank-server: unknown argument '--bogus'"},
           {"", "fuserank-server: no command: give --config FILE"},
           {"--config", "fuserank-server: --config needs a file"},
           {"--print-reference-config --config x.yaml",
            "fuserank-server: --print-reference-config takes no config"}}) {
    const ServerRun run = testing::RunServerToExit(args);
    EXPECT_EQ(run.exit_code, 2) << args << ": " << run.output;
    EXPECT_THAT(run.output, HasSubstr(why)) << args;
    EXPECT_THAT(run.output, HasSubstr("usage: fuserank-server")) << args;
  }
}

}  // namespace
}  // namespace fuserank
