// libFuzzer target: ParseConfig on any text. It must never crash or throw; an error is
// INVALID_ARGUMENT with one "<file>: <key>: <reason>" line per problem; an accepted config
// written back by EffectiveConfigYaml must parse again to the same effective config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/config.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_verdict.h"

namespace {

constexpr absl::string_view kFile = "fuzz.yaml";

// Every problem is "<file>: <key>: <reason>" on its own line. A key or reason may itself
// hold a line break (the messages do not escape what the YAML said), so only the first
// problem, which starts the message, is checked for its shape.
void CheckErrorLines(const absl::Status& status, absl::string_view file) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, status.ToString());
  const std::string prefix = absl::StrCat(file, ": ");
  const absl::string_view message = status.message();
  FUZZ_CHECK(absl::StartsWith(message, prefix),
             absl::StrCat("the error does not start with '", prefix, "': ", message));
  FUZZ_CHECK(absl::StrContains(message.substr(prefix.size()), ": "),
             absl::StrCat("the error names no key: ", message));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuserank::server;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Config> config = ParseConfig(text, kFile);
  fuserank::fuzz::FuzzVerdict(config.ok(), config.status().message());
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
