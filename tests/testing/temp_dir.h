// Temporary folders of tests: each one new and empty (mkdtemp) under the test temp dir, so
// a run never starts on an earlier run's files, and removed when the process exits, unless
// the test that made it failed: then it is kept for a look, and its path printed.
// Thread-safe.
#ifndef FUSERANK_TESTS_TESTING_TEMP_DIR_H_
#define FUSERANK_TESTS_TESTING_TEMP_DIR_H_

#include <string>

namespace fuserank::testing {

// A new empty folder <::testing::TempDir()>/<name>_XXXXXX (characters of `name` other than
// letters, digits, '.', '-' and '_' become '_'). It exists until the process exits, so a
// suite's SetUpTestSuite may make one for all its tests. At exit it is removed unless the
// test that made it failed (for a folder made outside a test: its suite, or the run, failed).
// A failure to make it aborts the test binary with the reason.
std::string MakeTempDir(const std::string& name);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_TESTING_TEMP_DIR_H_
