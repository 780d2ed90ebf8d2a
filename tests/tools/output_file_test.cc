// tools/cli/output_file: a temporary file beside the destination that nothing planted there
// can redirect, the destination replaced whole (a link there replaced, not followed, the
// mode the umask's), and CommitPair putting the first file back when the second fails.
#include "tools/cli/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace fuserank::cli {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The names in `dir`, sorted.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void WriteWhole(const std::string& destination, const std::string& bytes) {
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(destination);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE((*out)->Append(bytes).ok());
  ASSERT_TRUE((*out)->Commit().ok());
}

TEST(OutputFileTest, ALinkPlantedAtThePidNamedTemporaryIsNotFollowed) {
  // The temporary was "<destination>.tmp-<pid>", opened with fopen("wb"): a link planted
  // there had its target truncated and written, and then became the destination.
  const std::string dir = fuserank::testing::MakeTempDir("output_file");
  const std::string victim = dir + "/victim", out = dir + "/out.yaml";
  const std::string planted = absl::StrCat(out, ".tmp-", ::getpid());
  Write(victim, "precious");
  fs::create_symlink(victim, planted);
  WriteWhole(out, "new");
  EXPECT_EQ(Read(victim), "precious");
  EXPECT_TRUE(fs::is_symlink(planted)) << "left as it was";
  EXPECT_FALSE(fs::is_symlink(out));
  EXPECT_EQ(Read(out), "new");
  EXPECT_EQ(Names(dir), (std::vector<std::string>{"out.yaml", fs::path(planted).filename().string(),
                                                  "victim"}));
}

TEST(OutputFileTest, TemporariesAreNewFilesUnderNamesNoFileHad) {
  const std::string dir = fuserank::testing::MakeTempDir("output_file");
  const std::string out = dir + "/out.yaml";
  absl::StatusOr<std::unique_ptr<PendingFile>> a = PendingFile::Create(out);
  absl::StatusOr<std::unique_ptr<PendingFile>> b = PendingFile::Create(out);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->temp(), (*b)->temp());
  EXPECT_TRUE(absl::StartsWith((*a)->temp(), out + ".tmp-")) << (*a)->temp();
  EXPECT_EQ(fs::file_size((*a)->temp()), 0u);
  a->reset();
  b->reset();
  EXPECT_TRUE(Names(dir).empty()) << "an uncommitted temporary is removed";
}

TEST(OutputFileTest, ALinkAtTheDestinationIsReplacedNotFollowed) {
  const std::string dir = fuserank::testing::MakeTempDir("output_file");
  const std::string target = dir + "/target", out = dir + "/out.yaml";
  Write(target, "target");
  fs::create_symlink(target, out);
  WriteWhole(out, "new");
  EXPECT_FALSE(fs::is_symlink(out));
  EXPECT_EQ(Read(out), "new");
  EXPECT_EQ(Read(target), "target");
}

TEST(OutputFileTest, TheNewFileHasTheUmasksModeNotTheOldFilesMode) {
  const std::string dir = fuserank::testing::MakeTempDir("output_file");
  const std::string out = dir + "/out.yaml";
  Write(out, "old");
  ASSERT_EQ(::chmod(out.c_str(), 0600), 0);
  const mode_t old_umask = ::umask(022);
  WriteWhole(out, "new");
  ::umask(old_umask);
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

class CommitPairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fuserank::testing::MakeTempDir("commit_pair");
    first_ = dir_ + "/m.safetensors";
    second_ = dir_ + "/m.yaml";
  }

  // Pending files of both destinations, holding "new first" and "new second".
  void Prepare() {
    absl::StatusOr<std::unique_ptr<PendingFile>> first = PendingFile::Create(first_);
    absl::StatusOr<std::unique_ptr<OutputFile>> second = OutputFile::Create(second_);
    ASSERT_TRUE(first.ok() && second.ok());
    pending_first_ = *std::move(first);
    out_second_ = *std::move(second);
    Write(pending_first_->temp(), "new first");
    ASSERT_TRUE(out_second_->Append("new second").ok());
    ASSERT_TRUE(out_second_->Close().ok());
  }

  // The second's destination turned into a non-empty folder after the checks: its rename
  // fails (EISDIR), the first's has been done.
  void BreakSecond() {
    fs::remove(second_);
    fs::create_directory(second_);
    Write(second_ + "/keep", "");
  }

  absl::Status Commit() { return CommitPair(*pending_first_, out_second_->pending()); }

  std::string dir_, first_, second_;
  std::unique_ptr<PendingFile> pending_first_;
  std::unique_ptr<OutputFile> out_second_;
};

TEST_F(CommitPairTest, ReplacesBothAndLeavesNoOtherFile) {
  Write(first_, "old first");
  Write(second_, "old second");
  Prepare();
  ASSERT_TRUE(Commit().ok());
  EXPECT_EQ(Read(first_), "new first");
  EXPECT_EQ(Read(second_), "new second");
  pending_first_.reset();
  out_second_.reset();
  EXPECT_EQ(Names(dir_), (std::vector<std::string>{"m.safetensors", "m.yaml"}));
}

TEST_F(CommitPairTest, ASecondThatFailsPutsTheOldFirstBack) {
  Write(first_, "old first");
  Write(second_, "old second");
  Prepare();
  BreakSecond();
  const absl::Status status = Commit();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(status.message(), second_ + ": cannot replace it with")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), first_ + " is as it was before")) << status;
  EXPECT_EQ(Read(first_), "old first");
  pending_first_.reset();
  out_second_.reset();
  EXPECT_EQ(Names(dir_), (std::vector<std::string>{"m.safetensors", "m.yaml"}))
      << "no temporary and no .old- link left";
}

TEST_F(CommitPairTest, ASecondThatFailsRemovesAFirstThatWasNew) {
  Prepare();
  BreakSecond();
  const absl::Status status = Commit();
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(fs::exists(first_));
  pending_first_.reset();
  out_second_.reset();
  EXPECT_EQ(Names(dir_), (std::vector<std::string>{"m.yaml"}));
}

}  // namespace
}  // namespace fuserank::cli
