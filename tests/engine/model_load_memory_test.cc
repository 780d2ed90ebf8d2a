// Model::Load refuses a bad weights file without taking more memory than the file's own
// budgeted copy: a header length over the limit is refused from its 8 bytes (the header is
// never read), a file refused for a missing or extra tensor copies no misaligned table, and
// the misaligned tables a load copies are counted in its memory limit and estimate.
// Peak memory is measured in a forked child (model_peak_memory_util.h).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model.h"
#include "engine/model_memory.h"
#include "engine/model_spec.h"
#include "engine/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model_peak_memory_util.h"
#include "tests/testing/int8_layout_model.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

class ModelLoadMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/model_load_memory_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
                        getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Model "m" with two tables of `rows` x 8 floats, written to dir_; returns the spec path.
  // With `misaligned`, the weights file holds a 1-byte tensor 'pad' (not in the spec) first
  // and every other tensor after it at an odd offset, and lacks 'top_mlp.1.bias' (so it is
  // no larger than the spec implies and is read).
  std::string Write(int64_t rows, bool misaligned) {
    ModelSpec spec = fuserank::testing::SmallSpec(1, 1, rows, 8);
    spec.name = "m";
    spec.weights_path = "m.safetensors";
    fuserank::testing::TestModel model = fuserank::testing::MakeRandomModel(spec, 1);
    absl::StatusOr<std::string> path = fuserank::testing::WriteTestModel(model, dir_);
    EXPECT_TRUE(path.ok()) << path.status();
    if (misaligned) {
      model.weights.erase("top_mlp.1.bias");
      WriteMisaligned(model, Weights());
    }
    return path.ok() ? *path : "";
  }

  std::string Weights() const { return dir_ + "/m.safetensors"; }

  std::string dir_;

 private:
  static void WriteMisaligned(const fuserank::testing::TestModel& model, const std::string& path) {
    std::string header = R"({"pad":{"dtype":"I8","shape":[1],"data_offsets":[0,1]})";
    std::string data(1, '\0');
    for (const auto& [name, values] : model.weights) {
      const size_t begin = data.size();
      data.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
      absl::StrAppend(&header, ",\"", name, R"(":{"dtype":"F32","shape":[)",
                      absl::StrJoin(model.shapes.at(name), ","), R"(],"data_offsets":[)", begin,
                      ",", data.size(), "]}");
    }
    header += "}";
    std::string length(8, '\0');
    for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << length << header << data;
  }
};

TEST_F(ModelLoadMemoryTest, AHeaderOverTheLimitIsRefusedWithoutReadingIt) {
  const std::string path = Write(10, /*misaligned=*/false);
  const uint64_t header_len = 4 * kMaxSafetensorsHeaderBytes;
  {
    std::ofstream out(Weights(), std::ios::trunc | std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((header_len >> (8 * i)) & 0xFF));
  }
  fs::resize_file(Weights(), 8 + header_len + 64);  // sparse: no disk blocks
  const absl::Status status = Model::Load(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat(Weights(), ": header length ", header_len,
                                     " exceeds the limit of ", kMaxSafetensorsHeaderBytes)));
  const std::optional<int64_t> growth =
      test::PeakMemoryGrowth([&] { static_cast<void>(Model::Load(path)); });
  if (!growth.has_value()) GTEST_SKIP() << "no /proc/self/clear_refs to measure peak memory";
  EXPECT_LT(*growth, int64_t{kMaxSafetensorsHeaderBytes} / 4)
      << "the refusal read the " << header_len << "-byte header";
}

TEST_F(ModelLoadMemoryTest, AFileRefusedForItsTensorsCopiesNoMisalignedTable) {
  const std::string path = Write(int64_t{1} << 19, /*misaligned=*/true);  // tables of 16 MiB
  const absl::Status status = Model::Load(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("tensor 'top_mlp.1.bias' is missing"),
                                      HasSubstr("tensors not in the spec: 'pad'")));
  const int64_t file = static_cast<int64_t>(fs::file_size(Weights()));
  const std::optional<int64_t> growth =
      test::PeakMemoryGrowth([&] { static_cast<void>(Model::Load(path)); });
  if (!growth.has_value()) GTEST_SKIP() << "no /proc/self/clear_refs to measure peak memory";
  EXPECT_LT(*growth, file + file / 2)
      << "the refused file's tables were copied (file " << file << " bytes)";
}

// An int8 table of odd size before its F32 qparams (third-party writers do not align) puts
// the qparams at an offset that is not a multiple of 4: Load copies them again, and the
// memory it is allowed and the estimate count that copy before it is made.
TEST_F(ModelLoadMemoryTest, MisalignedTablesAreCountedBeforeTheyAreCopied) {
  const int64_t rows = (int64_t{1} << 20) + 1;  // qparams of 8 MiB each
  const uint64_t qparams = 2 * 8 * static_cast<uint64_t>(rows);
  fs::create_directories(dir_ + "/aligned");
  const std::string aligned_path =
      fuserank::testing::WriteInt8LayoutModel(dir_ + "/aligned", rows, /*misaligned=*/false);
  const std::string path = fuserank::testing::WriteInt8LayoutModel(dir_, rows, /*misaligned=*/true);
  absl::StatusOr<ModelSpec> spec = ParseModelSpecFile(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<ModelSpec> aligned_spec = ParseModelSpecFile(aligned_path);
  ASSERT_TRUE(aligned_spec.ok()) << aligned_spec.status();
  absl::StatusOr<WeightsFileBytes> aligned = Model::CheckWeightsFile(*aligned_spec);
  ASSERT_TRUE(aligned.ok()) << aligned.status();
  EXPECT_EQ(aligned->copied, 0u);
  absl::StatusOr<WeightsFileBytes> weights = Model::CheckWeightsFile(*spec);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->file, fs::file_size(Weights()));
  EXPECT_EQ(weights->copied, qparams);

  const ModelMemory memory = EstimateModelMemory(*spec, weights->file, {}, weights->copied);
  EXPECT_EQ(memory.model(), EstimateModelMemory(*spec, weights->file, {}).model() + qparams);
  EXPECT_THAT(memory.Breakdown(), HasSubstr("misaligned tables copied 16.0 MiB"));
  const absl::Status over = Model::Load(*spec, ModelLoadOptions{memory.model() - 1}).status();
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_THAT(over.message(), HasSubstr("misaligned tables copied 16.0 MiB"));
  EXPECT_TRUE(Model::Load(*spec, ModelLoadOptions{memory.model()}).ok());

#if !defined(__SANITIZE_THREAD__)  // ThreadSanitizer's shadow memory is resident too
  const std::optional<int64_t> growth = test::PeakMemoryGrowth(
      [&] { static_cast<void>(Model::Load(*spec, ModelLoadOptions{memory.model()})); });
  if (!growth.has_value()) GTEST_SKIP() << "no /proc/self/clear_refs to measure peak memory";
  // A quarter over the estimate: sanitizer allocators add ~15% here; without the copies
  // the estimate is half the growth.
  EXPECT_LT(*growth, static_cast<int64_t>(memory.model() + memory.model() / 4))
      << "the load took more than its estimate " << memory.ToString();
#endif
}

}  // namespace
}  // namespace fuserank::engine
