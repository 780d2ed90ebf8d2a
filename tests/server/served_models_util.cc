#include "tests/server/served_models_util.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/temp_dir.h"

namespace fuserank::server::test {

using fuserank::testing::TestModel;

std::string TestDir(const std::string& name) {
  return fuserank::testing::MakeTempDir(absl::StrCat("served_models_", name));
}

TestModel Version(const std::string& name, const std::string& version, uint64_t seed) {
  engine::ModelSpec spec = fuserank::testing::SmallSpec(1, 1, 50, 4);
  spec.name = name;
  spec.version = version;
  spec.weights_path = name + ".safetensors";
  return fuserank::testing::MakeRandomModel(spec, seed);
}

std::string Write(const TestModel& model, const std::string& dir) {
  absl::StatusOr<std::string> path = fuserank::testing::WriteTestModel(model, dir);
  EXPECT_TRUE(path.ok()) << path.status();
  return path.ok() ? *path : "";
}

ModelLoaderOptions CpuOptions() {
  ModelLoaderOptions options;
  options.device = engine::DeviceChoice::kCpu;
  options.backend.workers = 2;
  options.backend.max_batch_candidates = 256;
  options.batcher.max_batch_candidates = 256;
  options.limits.max_candidates = 64;
  return options;
}

VersionLoader FileLoader() {
  return [](const std::string& name, const std::string& path, const ServedModel* previous) {
    return LoadModelVersion(name, path, CpuOptions(), previous);
  };
}

v1::RankRequest Request() {
  v1::RankRequest request;
  v1::Feature* user = request.add_user_features();
  user->set_name("user_0");
  user->add_ids(3);
  request.add_user_dense(0.5f);
  request.add_user_dense(-1.0f);
  for (int c = 0; c < 3; ++c) {
    v1::Candidate* candidate = request.add_candidates();
    candidate->set_item_id(100 + c);
    v1::Feature* item = candidate->add_features();
    item->set_name("item_0");
    item->add_ids(c * 7);
    for (float d : {0.1f, 0.2f, 0.3f}) candidate->add_dense(d * (c + 1));
  }
  return request;
}

void ServedModelsTest::SetUp() {
  dir_ = TestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  v1_path_ = Write(Version("m", "v1", 1), dir_ + "/v1");
  v2_path_ = Write(Version("m", "v2", 2), dir_ + "/v2");
  other_path_ = Write(Version("other", "o1", 3), dir_ + "/other");
}

}  // namespace fuserank::server::test
