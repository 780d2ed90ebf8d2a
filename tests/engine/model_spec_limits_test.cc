// Model specs whose reading must stay bounded or exact whatever they hold: an alias bomb (a
// small file whose aliases stand for millions of unknown keys) is refused naming the file and
// line, a spec with thousands of problems gives a message of at most kMaxErrorLines of them,
// and dense widths near the int limits are summed without overflow.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/error_list.h"
#include "engine/model_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kHead[] = "name: m\nweights: m.safetensors\ninteraction: concat\ntop_mlp: [1]\n";

// K unknown keys in one anchored map, then a tables list of N aliases of it: K x N unknown
// keys once the aliases are followed (the audit's 41 KB spec with K = N = 3000 took 4.4 GB
// and 25 s). Here K = N = 300: 90,000 problems, a message of ~13 MB before the fix.
TEST(ModelSpecLimitsTest, AnAliasBombIsRefusedNamingFileAndLine) {
  std::string yaml = absl::StrCat(kHead, "holder: &a {");
  for (int k = 0; k < 300; ++k) absl::StrAppend(&yaml, k > 0 ? ", " : "", "k", k, ": 1");
  yaml += "}\ntables: [";
  for (int n = 0; n < 300; ++n) absl::StrAppend(&yaml, n > 0 ? ", " : "", "*a");
  yaml += "]\n";
  const std::string dir =
      absl::StrCat(std::filesystem::temp_directory_path().string(), "/spec_alias_", getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/bomb.yaml";
  std::ofstream(path) << yaml;
  const absl::Status status = ParseModelSpecFile(path).status();
  std::filesystem::remove_all(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(path + ": line 5, column 9: YAML anchors (&name) and aliases "
                                     "(*name) are not accepted (anchor '&a')"),
                    Not(HasSubstr("unknown key"))));
  EXPECT_LT(status.message().size(), 1000u);
}

// Without aliases a spec's problems are as many as its text has room for: the message keeps
// the first kMaxErrorLines and counts the rest.
TEST(ModelSpecLimitsTest, ThousandsOfProblemsGiveABoundedMessage) {
  std::string yaml = absl::StrCat(kHead, "tables:\n");
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&yaml, "  - {colour: red}\n");
  const absl::Status status = ParseModelSpec(yaml, "").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("tables[0].name: missing"), Not(HasSubstr("tables[1999]")),
                    EndsWith(absl::StrCat("; ... and ", 2000 * 5 - kMaxErrorLines, " more"))));
  EXPECT_LT(status.message().size(), kMaxErrorLines * 200);
}

// dense.user + dense.item is checked in 64 bits before the range errors stop validation:
// in int, -2^31 + -2^31 wrapped to 0 ("no dense features") and 2^31-1 + 2^31-1 overflowed.
TEST(ModelSpecLimitsTest, DenseWidthsAreSummedWithoutOverflow) {
  for (const char* dense :
       {"{user: -2147483648, item: -2147483648}", "{user: 2147483647, item: 2147483647}"}) {
    const absl::Status status =
        ParseModelSpec(absl::StrCat(kHead, "dense: ", dense, "\nbottom_mlp: [4]\n"), "").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << dense;
    EXPECT_THAT(status.message(), AllOf(HasSubstr("dense.user: must be in 0..1048576"),
                                        HasSubstr("dense.item: must be in 0..1048576"),
                                        Not(HasSubstr("no dense features")),
                                        Not(HasSubstr("at least one table or dense feature"))))
        << dense;
  }
}

}  // namespace
}  // namespace fuserank::engine
