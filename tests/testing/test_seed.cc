#include "tests/testing/test_seed.h"

#include <cstdlib>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fuserank::testing {

uint64_t TestSeed() {
  const char* fixed = std::getenv("FUSERANK_TEST_SEED");
  uint64_t seed = 0;
  if (fixed != nullptr && absl::SimpleAtoi(fixed, &seed)) return seed;
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device();
}

std::string SeedTrace(uint64_t seed) {
  return absl::StrCat("seed ", seed, " (replay: FUSERANK_TEST_SEED=", seed, ")");
}

}  // namespace fuserank::testing
