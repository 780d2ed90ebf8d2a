// Measures how much resident memory a piece of loading code takes at its peak, for tests
// that prove a refused file is refused before it is read or copied. The code runs in a
// forked child (the parent's peak is a high-water mark of every earlier test), whose peak
// is reset first (/proc/self/clear_refs). Test helper; call from the test's own thread.
#ifndef FUSERANK_TESTS_ENGINE_MODEL_PEAK_MEMORY_UTIL_H_
#define FUSERANK_TESTS_ENGINE_MODEL_PEAK_MEMORY_UTIL_H_

#include <cstdint>
#include <functional>
#include <optional>

namespace fuserank::engine::test {

// Bytes by which the peak resident memory of a child running `f` rose above its resident
// memory when `f` started; INT64_MAX when the child died before it could report (out of
// memory, a crash); nullopt when the system cannot say (no /proc, no fork). `f` runs in the
// child only: what it changes does not reach the caller.
std::optional<int64_t> PeakMemoryGrowth(const std::function<void()>& f);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_MODEL_PEAK_MEMORY_UTIL_H_
