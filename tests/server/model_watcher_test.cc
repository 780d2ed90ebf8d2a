// ModelWatcher, driven poll by poll (PollOnce) so that no test depends on timing: a
// replaced file is loaded once it has stayed the same for one more poll, a file that is
// still changing is not, a refused version is not retried until the files change again,
// a refused spec is not read again while its stamp stays, a new spec's weights file is
// followed, the thread itself picks up a change, and once asked to stop it starts no reload;
// the reload's log line names the file that changed.
#include "server/model_watcher.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_loader.h"
#include "server/model_roots.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

namespace fs = std::filesystem;

class ModelWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fuserank::testing::MakeTempDir(absl::StrCat(
        "model_watcher_", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    for (const char* version : {"v1", "v2", "v3"}) {
      engine::ModelSpec spec = testing::SmallSpec(1, 1, 40, 4);
      spec.name = "m";
      spec.version = version;
      spec.weights_path = "m.safetensors";
      ASSERT_TRUE(
          testing::WriteTestModel(testing::MakeRandomModel(spec, version[1]), dir_ + "/" + version)
              .ok());
    }
    fs::create_directories(dir_ + "/live");
    Install("v1");
    models_ = std::make_unique<ServedModels>(
        [](const std::string& name, const std::string& path, const ServedModel* previous) {
          ModelLoaderOptions options;
          options.device = engine::DeviceChoice::kCpu;
          options.backend.workers = 1;
          options.backend.max_batch_candidates = 64;
          options.batcher.max_batch_candidates = 64;
          options.limits.max_candidates = 64;
          return LoadModelVersion(name, path, options, previous);
        });
    ASSERT_TRUE(models_->Load("", dir_ + "/live/m.yaml", false).ok());
  }

  // Puts version `from`'s files in live/ the safe way: each written beside and renamed over.
  void Install(const std::string& from) {
    for (const char* file : {"m.safetensors", "m.yaml"}) {
      const std::string tmp = absl::StrCat(dir_, "/live/.", file, ".tmp");
      fs::copy_file(absl::StrCat(dir_, "/", from, "/", file), tmp,
                    fs::copy_options::overwrite_existing);
      fs::rename(tmp, absl::StrCat(dir_, "/live/", file));
    }
  }

  std::string Serving() { return (*models_->Acquire(""))->version(); }

  std::string dir_;
  std::unique_ptr<ServedModels> models_;
};

TEST_F(ModelWatcherTest, LoadsAReplacedFileOnceItHasSettled) {
  ModelWatcher watcher(models_.get(), absl::Hours(1));  // the thread stays out of the way
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 0) << "nothing changed";
  Install("v2");
  watcher.PollOnce();
  EXPECT_EQ(Serving(), "v1") << "a change is not loaded at the poll that first sees it";
  watcher.PollOnce();
  EXPECT_EQ(Serving(), "v2");
  EXPECT_EQ(watcher.reloads(), 1);
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 1) << "the loaded files are not loaded again";
}

// SIGTERM's drain asks the watch to stop first (Server::Shutdown): from then on it starts
// no reload, however settled a change is.
TEST_F(ModelWatcherTest, StartsNoReloadOnceAskedToStop) {
  ModelWatcher watcher(models_.get(), absl::Hours(1));
  Install("v2");
  watcher.PollOnce();
  watcher.RequestStop();
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 0);
  EXPECT_EQ(Serving(), "v1");
}

TEST_F(ModelWatcherTest, WaitsWhileTheFileKeepsChanging) {
  ModelWatcher watcher(models_.get(), absl::Hours(1));
  // A new file (a new inode: v1 keeps the one it maps) that its writer is still writing.
  const std::string weights = dir_ + "/live/m.safetensors";
  const std::string tmp = dir_ + "/live/.partial";
  fs::copy_file(dir_ + "/v2/m.safetensors", tmp);
  fs::resize_file(tmp, fs::file_size(tmp) / 3);
  fs::rename(tmp, weights);
  watcher.PollOnce();
  fs::resize_file(weights, fs::file_size(dir_ + "/v2/m.safetensors"));  // still being written
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 0) << "the file changed between the two polls";
  Install("v2");
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 1);
  EXPECT_EQ(watcher.refused(), 0);
  EXPECT_EQ(Serving(), "v2");
}

TEST_F(ModelWatcherTest, ARefusedVersionIsNotRetriedUntilTheFilesChangeAgain) {
  ModelWatcher watcher(models_.get(), absl::Hours(1));
  const std::string tmp = dir_ + "/live/.broken";
  fs::copy_file(dir_ + "/v2/m.safetensors", tmp);
  fs::resize_file(tmp, 100);
  fs::rename(tmp, dir_ + "/live/m.safetensors");
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.refused(), 1);
  EXPECT_EQ(Serving(), "v1") << "the old version keeps serving";
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 1) << "the same broken files are not tried again";
  Install("v3");
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 2);
  EXPECT_EQ(Serving(), "v3");
}

// A refused spec is not read again at every poll (an alias bomb took seconds to parse, and
// the watch parsed it each interval): the stamp it was refused under stands for its text.
// Shown with a spec rewritten in place to the same size and modification time, which the
// stamps cannot see: read again, it would name a new weights file and be loaded.
TEST_F(ModelWatcherTest, ARefusedSpecIsNotReadAgainWhileItsStampStays) {
  ModelWatcher watcher(models_.get(), absl::Hours(1));
  fs::copy_file(dir_ + "/v2/m.safetensors", dir_ + "/live/m2.safetensors");
  std::ifstream in(dir_ + "/v2/m.yaml");
  const std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string bad = yaml + "colour: red\n";  // refused: an unknown key
  std::string good = yaml;
  const size_t at = good.find("m.safetensors");
  ASSERT_NE(at, std::string::npos);
  good.replace(at, 1, "m2");
  ASSERT_LT(good.size() + 2, bad.size());
  good += "#" + std::string(bad.size() - good.size() - 2, ' ') + "\n";  // the same size
  const std::string spec = dir_ + "/live/m.yaml";
  std::ofstream(dir_ + "/live/.tmp") << bad;
  fs::rename(dir_ + "/live/.tmp", spec);
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.refused(), 1);
  const FileStamp refused = StampFile(spec);
  std::ofstream(spec, std::ios::trunc) << good;  // in place: the same inode
  const timespec times[2] = {{0, UTIME_OMIT},
                             {refused.mtime_ns / 1000000000, refused.mtime_ns % 1000000000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, spec.c_str(), times, 0), 0);
  ASSERT_TRUE(StampFile(spec) == refused) << "test bug: the rewrite changed the stamp";
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 1) << "the refused spec was read again";
  EXPECT_EQ(Serving(), "v1");
  std::ofstream(dir_ + "/live/.tmp") << good;  // a new file: a change the stamps see
  fs::rename(dir_ + "/live/.tmp", spec);
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 2);
  EXPECT_EQ(Serving(), "v2");
}

// The watch stamps the weights file the spec on disk names now, not the one the serving
// version was loaded from: a new spec naming a new file that is first written truncated is
// refused, and loaded once that file is complete.
TEST_F(ModelWatcherTest, FollowsTheWeightsFileANewSpecNames) {
  ModelWatcher watcher(models_.get(), absl::Hours(1));
  const std::string tmp = dir_ + "/live/.tmp";
  fs::copy_file(dir_ + "/v2/m.safetensors", tmp);
  fs::resize_file(tmp, 100);
  fs::rename(tmp, dir_ + "/live/m2.safetensors");
  std::ifstream in(dir_ + "/v2/m.yaml");
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = yaml.find("m.safetensors");
  ASSERT_NE(at, std::string::npos);
  yaml.replace(at, 1, "m2");
  std::ofstream(tmp) << yaml;
  fs::rename(tmp, dir_ + "/live/m.yaml");
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.refused(), 1) << "m2.safetensors is truncated";
  EXPECT_EQ(Serving(), "v1");
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 1);
  fs::copy_file(dir_ + "/v2/m.safetensors", tmp);  // m2.safetensors complete
  fs::rename(tmp, dir_ + "/live/m2.safetensors");
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 2);
  EXPECT_EQ(Serving(), "v2");
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 2) << "the loaded files are not loaded again";
}

TEST_F(ModelWatcherTest, FollowsAReloadToAnotherPath) {
  ModelWatcher watcher(models_.get(), absl::Hours(1));
  ASSERT_TRUE(models_->Reload("", dir_ + "/v2/m.yaml").ok());
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 0) << "the files now serving did not change";
  Install("v3");  // live/ is no longer what serves
  watcher.PollOnce();
  watcher.PollOnce();
  EXPECT_EQ(watcher.reloads(), 0);
  EXPECT_EQ(Serving(), "v2");
}

TEST_F(ModelWatcherTest, TheThreadPicksUpAChange) {
  ModelWatcher watcher(models_.get(), absl::Milliseconds(20));
  Install("v2");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Serving() != "v2" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Serving(), "v2");
  watcher.Stop();
}

// The files are stamped as the spec names them, symlinks not followed in the name: a
// weights file that is a symlink switched to another file is a change (a version loaded
// with roots confines the resolved paths, but watches the named ones).
TEST_F(ModelWatcherTest, AWeightsSymlinkSwitchedToAnotherFileIsAChange) {
  fs::create_directories(dir_ + "/sym");
  fs::copy_file(dir_ + "/v1/m.yaml", dir_ + "/sym/m.yaml");
  fs::create_symlink(dir_ + "/v1/m.safetensors", dir_ + "/sym/m.safetensors");
  ModelLoaderOptions options;
  options.device = engine::DeviceChoice::kCpu;
  options.backend.workers = 1;
  options.backend.max_batch_candidates = 64;
  options.batcher.max_batch_candidates = 64;
  options.roots = std::make_shared<const ModelRoots>(std::vector<std::string>{dir_});
  ServedModels models(
      [&](const std::string& name, const std::string& path, const ServedModel* previous) {
        return LoadModelVersion(name, path, options, previous);
      });
  ASSERT_TRUE(models.Load("", dir_ + "/sym/m.yaml", false).ok());
  const ModelHandle first = *models.Acquire("");
  EXPECT_EQ(first->files.weights_path, dir_ + "/sym/m.safetensors");
  fs::remove(dir_ + "/sym/m.safetensors");
  fs::create_symlink(dir_ + "/v2/m.safetensors", dir_ + "/sym/m.safetensors");
  EXPECT_FALSE(Restamp(first->files) == first->files);
}

// The reload's log line names the file that changed: the spec, the weights, or both.
TEST(ChangedFilesTest, NamesWhatChanged) {
  ModelFiles before{"/m/m.yaml", "/m/m.safetensors", {true, 1, 2, 30, 400}, {true, 1, 3, 50, 600}};
  ModelFiles now = before;
  EXPECT_EQ(ChangedFiles(before, now), "");
  now.weights.mtime_ns = 601;
  EXPECT_EQ(ChangedFiles(before, now), "/m/m.safetensors");
  now.spec.size = 31;
  EXPECT_EQ(ChangedFiles(before, now), "/m/m.yaml and /m/m.safetensors");
  now.weights = before.weights;
  EXPECT_EQ(ChangedFiles(before, now), "/m/m.yaml");
  now.weights_path = "/m/other.safetensors";  // the new spec names another file
  EXPECT_EQ(ChangedFiles(before, now), "/m/m.yaml and /m/other.safetensors");
}

}  // namespace
}  // namespace fuserank::server
