// ModelRoots: a path is confined when its realpath lies inside a root's realpath; symlinks
// and ".." cannot lead out; a root that is a symlink follows its current target; the
// default roots are the configured models' spec and weights directories and those that
// files symlinked elsewhere resolve to.
#include "server/model_roots.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ModelRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::weakly_canonical(
               absl::StrCat(::testing::TempDir(), "/model_roots_",
                            ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
                            getpid()))
               .string();
    fs::remove_all(dir_);
    for (const char* sub : {"/root/v1", "/root/v2", "/outside"}) fs::create_directories(dir_ + sub);
    for (const char* file : {"/root/v1/m.yaml", "/root/v2/m.yaml", "/outside/m.yaml"}) {
      std::ofstream(dir_ + file) << "x";
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
};

TEST_F(ModelRootsTest, AcceptsPathsInsideAndRefusesEverythingElse) {
  const ModelRoots roots({dir_ + "/root"});
  absl::StatusOr<std::string> inside = roots.Confine(dir_ + "/root/v1/m.yaml", "model spec");
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_EQ(*inside, dir_ + "/root/v1/m.yaml");
  EXPECT_TRUE(roots.Confine(dir_ + "/root/v1/../v2/m.yaml", "model spec").ok());
  fs::create_symlink(dir_ + "/outside/m.yaml", dir_ + "/root/link.yaml");
  fs::create_directory_symlink(dir_ + "/outside", dir_ + "/root/linkdir");
  for (const std::string& path :
       {dir_ + "/outside/m.yaml", dir_ + "/root/../outside/m.yaml", dir_ + "/root/link.yaml",
        dir_ + "/root/linkdir/m.yaml", dir_ + "/rootx/m.yaml", std::string("/etc/hostname")}) {
    absl::StatusOr<std::string> confined = roots.Confine(path, "model spec");
    ASSERT_FALSE(confined.ok()) << path;
    if (confined.status().code() == absl::StatusCode::kNotFound) continue;  // rootx
    EXPECT_EQ(confined.status().code(), absl::StatusCode::kPermissionDenied) << path;
    EXPECT_THAT(
        confined.status().message(),
        HasSubstr(absl::StrCat("is outside the model roots: ", dir_, "/root (model.roots)")));
  }
  absl::StatusOr<std::string> missing = roots.Confine(dir_ + "/root/none.yaml", "weights");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("weights '"));
  EXPECT_FALSE(ModelRoots().Confine(dir_ + "/root/v1/m.yaml", "model spec").ok());
}

TEST_F(ModelRootsTest, ARootThatIsASymlinkFollowsItsCurrentTarget) {
  fs::create_directory_symlink(dir_ + "/root/v1", dir_ + "/current");
  const ModelRoots roots({dir_ + "/current"});
  EXPECT_TRUE(roots.Confine(dir_ + "/current/m.yaml", "model spec").ok());
  EXPECT_FALSE(roots.Confine(dir_ + "/root/v2/m.yaml", "model spec").ok());
  fs::remove(dir_ + "/current");  // switched, as `ln -sfn v2 current` does
  fs::create_directory_symlink(dir_ + "/root/v2", dir_ + "/current");
  absl::StatusOr<std::string> switched = roots.Confine(dir_ + "/current/m.yaml", "model spec");
  ASSERT_TRUE(switched.ok()) << switched.status();
  EXPECT_EQ(*switched, dir_ + "/root/v2/m.yaml");
}

TEST_F(ModelRootsTest, TheDefaultRootsAreTheModelsSpecAndWeightsDirectories) {
  engine::ModelSpec spec = testing::SmallSpec(1, 1, 10, 4);
  spec.weights_path = dir_ + "/outside/small.safetensors";  // absolute, elsewhere
  absl::StatusOr<std::string> path =
      testing::WriteTestModel(testing::MakeRandomModel(spec, 1), dir_ + "/root/v1");
  ASSERT_TRUE(path.ok()) << path.status();
  std::ifstream in(*path);
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const size_t at = yaml.find("small.safetensors");
  ASSERT_NE(at, std::string::npos);
  yaml.replace(at, std::string("small.safetensors").size(), spec.weights_path);
  std::ofstream(*path, std::ios::trunc) << yaml;
  Config config;
  config.models = {ModelConfig{"", *path}};
  EXPECT_THAT(ModelRoots::FromConfig(config).roots(),
              ElementsAre(dir_ + "/root/v1", dir_ + "/outside"));
  config.model_roots = {"/srv/models"};
  EXPECT_THAT(ModelRoots::FromConfig(config).roots(), ElementsAre("/srv/models"));
}

// Confine checks resolved paths, so the default roots hold the directories that a spec or
// weights file symlinked into another directory resolves to: a spec linked into a store,
// and a Hugging Face cache's weights (snapshots/ -> blobs/). A directory symlink is not
// frozen into its current target.
TEST_F(ModelRootsTest, TheDefaultRootsHoldTheTargetsOfSymlinkedFiles) {
  engine::ModelSpec spec = testing::SmallSpec(1, 1, 10, 4);
  spec.name = "m";
  spec.weights_path = "m.safetensors";
  ASSERT_TRUE(testing::WriteTestModel(testing::MakeRandomModel(spec, 1), dir_ + "/store").ok());
  fs::create_directories(dir_ + "/models");
  fs::create_symlink("../store/m.yaml", dir_ + "/models/m.yaml");
  ASSERT_TRUE(testing::WriteTestModel(testing::MakeRandomModel(spec, 2), dir_ + "/snap").ok());
  fs::create_directories(dir_ + "/blobs");
  fs::rename(dir_ + "/snap/m.safetensors", dir_ + "/blobs/abc");
  fs::create_symlink("../blobs/abc", dir_ + "/snap/m.safetensors");
  fs::create_directory_symlink(dir_ + "/snap", dir_ + "/current");
  Config config;
  config.models = {ModelConfig{"a", dir_ + "/models/m.yaml"},
                   ModelConfig{"b", dir_ + "/current/m.yaml"}};
  const ModelRoots roots = ModelRoots::FromConfig(config);
  EXPECT_THAT(roots.roots(),
              ElementsAre(dir_ + "/models", dir_ + "/store", dir_ + "/current", dir_ + "/blobs"));
  for (const std::string& path : {dir_ + "/models/m.yaml", dir_ + "/store/m.safetensors",
                                  dir_ + "/current/m.yaml", dir_ + "/current/m.safetensors"}) {
    absl::StatusOr<std::string> confined = roots.Confine(path, "file");
    EXPECT_TRUE(confined.ok()) << confined.status();
  }
  EXPECT_FALSE(roots.Confine(dir_ + "/outside/m.yaml", "model spec").ok());
}

}  // namespace
}  // namespace fuserank::server
