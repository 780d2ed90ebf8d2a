#include "tests/testing/temp_dir.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace fuserank::testing {
namespace {

// A folder and what made it: the test (null outside one) and its suite (null outside one).
struct Made {
  std::string path;
  const ::testing::TestInfo* test;
  const ::testing::TestSuite* suite;
};

struct Registry {
  absl::Mutex mu;
  // The process that registered `made`: a forked child that exits must not remove them.
  pid_t owner ABSL_GUARDED_BY(mu) = 0;
  std::vector<Made> made ABSL_GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static Registry* const registry = new Registry();  // never destroyed: read at exit
  return *registry;
}

bool Failed(const Made& made) {
  if (made.test != nullptr) return made.test->result()->Failed();
  if (made.suite != nullptr) return made.suite->Failed();
  return ::testing::UnitTest::GetInstance()->Failed();
}

// At exit (registered after gtest's UnitTest exists, so run before it is destroyed).
void RemoveAtExit() {
  Registry& registry = TheRegistry();
  absl::MutexLock lock(&registry.mu);
  if (registry.owner != getpid()) return;
  for (const Made& made : registry.made) {
    if (Failed(made)) {
      std::fprintf(stderr, "[ KEPT     ] %s (made by %s, which failed)\n", made.path.c_str(),
                   made.test != nullptr
                       ? absl::StrCat(made.test->test_suite_name(), ".", made.test->name()).c_str()
                   : made.suite != nullptr ? made.suite->name()
                                           : "the run");
      continue;
    }
    std::error_code ignored;
    std::filesystem::remove_all(made.path, ignored);
  }
  registry.made.clear();
}

}  // namespace

std::string MakeTempDir(const std::string& name) {
  std::string base = name;
  for (char& c : base) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '-' || c == '_';
    if (!plain) c = '_';
  }
  std::string root = ::testing::TempDir();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  std::string pattern = absl::StrCat(root, "/", base, "_XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "MakeTempDir: mkdtemp(%s): %s\n", pattern.c_str(), std::strerror(errno));
    std::abort();
  }
  ::testing::UnitTest* const unit = ::testing::UnitTest::GetInstance();
  Registry& registry = TheRegistry();
  absl::MutexLock lock(&registry.mu);
  if (registry.owner != getpid()) {
    registry.owner = getpid();
    registry.made.clear();  // a forked child's copy: its parent removes those
    std::atexit(RemoveAtExit);
  }
  registry.made.push_back({pattern, unit->current_test_info(), unit->current_test_suite()});
  return pattern;
}

}  // namespace fuserank::testing
