// libFuzzer target: ParseConfig on any text. It must never crash or throw; an error is
// INVALID_ARGUMENT with one "<file>: <key>: <reason>" line per problem; an accepted config
// written back by EffectiveConfigYaml must parse again to the same effective config.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr absl::string_view kFile = "fuzz.yaml";

void CheckErrorLines(const absl::Status& status, absl::string_view file) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, status.ToString());
  FUZZ_CHECK(!status.message().empty(), "an error without a message");
  const std::string prefix = absl::StrCat(file, ": ");
  for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
    // A reason may itself span lines (a YAML message); only lines that start a problem
    // carry the prefix, and the first always does.
    if (!absl::StartsWith(line, prefix)) {
      FUZZ_CHECK(line.data() != status.message().data(),
                 absl::StrCat("the first error line does not start with '", prefix, "': ", line));
      continue;
    }
    const absl::string_view rest = line.substr(prefix.size());
    const size_t colon = rest.find(": ");
    FUZZ_CHECK(colon != absl::string_view::npos && colon > 0,
               absl::StrCat("an error line names no key: ", line));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuserank::server;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Config> config = ParseConfig(text, kFile);
  if (!config.ok()) {
    CheckErrorLines(config.status(), kFile);
    return 0;
  }
  FUZZ_CHECK(!config->models.empty(), "an accepted config serves no model");
  const std::string effective = EffectiveConfigYaml(*config);
  absl::StatusOr<Config> again = ParseConfig(effective, "effective.yaml");
  FUZZ_CHECK(again.ok(), absl::StrCat("the effective config does not parse back: ",
                                      again.status().ToString(), "\n--- effective:\n", effective));
  const std::string effective_again = EffectiveConfigYaml(*again);
  FUZZ_CHECK(effective_again == effective,
             absl::StrCat("the effective config changes on a round trip:\n--- first:\n", effective,
                          "\n--- second:\n", effective_again));
  return 0;
}
