// libFuzzer target: ParseModelSpec on any text. It must never crash or throw; an accepted
// spec passes ValidateModelSpec, its derived widths are sane, and ModelSpecToYaml writes it
// back as YAML that parses to the same spec.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/model_spec.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_verdict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuserank::engine;
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(text, "/fuzz/models");
  fuserank::fuzz::FuzzVerdict(spec.ok(), spec.status().message());
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument,
               spec.status().ToString());
    FUZZ_CHECK(!spec.status().message().empty(), "an error without a message");
    return 0;
  }
  const absl::Status valid = ValidateModelSpec(*spec);
  FUZZ_CHECK(valid.ok(), absl::StrCat("a parsed spec fails validation: ", valid.ToString()));
  FUZZ_CHECK(!spec->tables.empty() || spec->dense_total() > 0, "an accepted spec has no input");
  FUZZ_CHECK(spec->concat_width() > 0 && spec->interaction_width() > 0,
             absl::StrCat("widths: concat ", spec->concat_width(), ", interaction ",
                          spec->interaction_width()));
  const std::string yaml = ModelSpecToYaml(*spec);
  absl::StatusOr<ModelSpec> again = ParseModelSpec(yaml, "/fuzz/models");
  FUZZ_CHECK(again.ok(), absl::StrCat("the written spec does not parse back: ",
                                      again.status().ToString(), "\n--- written:\n", yaml));
  const std::string yaml_again = ModelSpecToYaml(*again);
  FUZZ_CHECK(yaml_again == yaml, absl::StrCat("the spec changes on a round trip:\n--- first:\n",
                                              yaml, "\n--- second:\n", yaml_again));
  return 0;
}
