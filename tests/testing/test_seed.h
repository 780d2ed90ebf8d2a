// Seeds of randomized tests: FUSERANK_TEST_SEED=<n> replays a failure, otherwise each run
// draws a fresh seed. Callers print it (SCOPED_TRACE) so a failure says how to replay it.
// Thread-safe.
#ifndef FUSERANK_TESTS_TESTING_TEST_SEED_H_
#define FUSERANK_TESTS_TESTING_TEST_SEED_H_

#include <cstdint>
#include <string>

namespace fuserank::testing {

// FUSERANK_TEST_SEED when it is set to a number, else a random seed.
uint64_t TestSeed();

// "seed <n> (replay: FUSERANK_TEST_SEED=<n>)", for SCOPED_TRACE.
std::string SeedTrace(uint64_t seed);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_TESTING_TEST_SEED_H_
