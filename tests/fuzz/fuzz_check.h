// FUZZ_CHECK: the fuzz targets' assertion. A broken invariant prints what was expected
// and aborts, which libFuzzer records as a crash and saves the input (crash-<sha1>).
// Header-only; no state.
#ifndef FUSERANK_TESTS_FUZZ_FUZZ_CHECK_H_
#define FUSERANK_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond, detail)                                                              \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      const std::string fuzz_detail_ = (detail);                                              \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n  %s\n", __FILE__, __LINE__, #cond, \
                   fuzz_detail_.c_str());                                                     \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

#endif  // FUSERANK_TESTS_FUZZ_FUZZ_CHECK_H_
