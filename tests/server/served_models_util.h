// What the ServedModels tests share: three small model versions written to a test's own
// folder ("m" at v1 and v2, "other" at o1), a CPU loader for them, a request they all
// score, and a bounded wait. Test helpers; not thread-safe.
#ifndef FUSERANK_TESTS_SERVER_SERVED_MODELS_UTIL_H_
#define FUSERANK_TESTS_SERVER_SERVED_MODELS_UTIL_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "fuserank/v1/ranker.pb.h"
#include "gtest/gtest.h"
#include "server/model_loader.h"
#include "server/served_models.h"
#include "tests/testing/test_model.h"

namespace fuserank::server::test {

// A new empty folder for the test `name` under the gtest temporary folder, removed at exit
// unless the test failed (tests/testing/temp_dir.h).
std::string TestDir(const std::string& name);

// Model `name` at `version` (1 user table, 1 item table of 50 rows, width 4).
fuserank::testing::TestModel Version(const std::string& name, const std::string& version,
                                     uint64_t seed);

// Writes `model` into `dir`; returns its spec path ("" after a test failure).
std::string Write(const fuserank::testing::TestModel& model, const std::string& dir);

// The CPU engine with 2 workers, 256 candidates a batch, 64 a request.
ModelLoaderOptions CpuOptions();

// LoadModelVersion with CpuOptions().
VersionLoader FileLoader();

// Three candidates with one user and one item id each.
v1::RankRequest Request();

// Waits up to 10 s for `done`.
template <typename F>
bool Eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Writes the three versions into the test's folder (dir_).
class ServedModelsTest : public ::testing::Test {
 protected:
  void SetUp() override;

  std::string dir_, v1_path_, v2_path_, other_path_;
};

}  // namespace fuserank::server::test

#endif  // FUSERANK_TESTS_SERVER_SERVED_MODELS_UTIL_H_
