// FuzzVerdict: when the environment sets FUSERANK_FUZZ_VERDICT, each fuzz target prints
// whether the code under test accepted its input ("fuzz-verdict: accepted" or
// "fuzz-verdict: rejected: <why>") to stderr. scripts/test-fuzz.sh runs every seed once this
// way to check that the seeds named valid_* are accepted and bad_* rejected, so the corpus
// keeps reaching past validation when the formats change. Off (one cached getenv) while
// fuzzing. Header-only; thread-safe (the flag is a function-local static).
#ifndef FUSERANK_TESTS_FUZZ_FUZZ_VERDICT_H_
#define FUSERANK_TESTS_FUZZ_FUZZ_VERDICT_H_

#include <cstdio>
#include <cstdlib>

#include "absl/strings/string_view.h"

namespace fuserank::fuzz {

inline void FuzzVerdict(bool accepted, absl::string_view why = {}) {
  static const bool enabled = std::getenv("FUSERANK_FUZZ_VERDICT") != nullptr;
  if (!enabled) return;
  if (accepted) {
    std::fprintf(stderr, "fuzz-verdict: accepted\n");
  } else {
    std::fprintf(stderr, "fuzz-verdict: rejected: %.*s\n", static_cast<int>(why.size()),
                 why.data());
  }
}

}  // namespace fuserank::fuzz

#endif  // FUSERANK_TESTS_FUZZ_FUZZ_VERDICT_H_
