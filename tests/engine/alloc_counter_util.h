// Counts heap allocations through the global operator new while a ScopedAllocationCounter
// is alive, on every thread (this test binary replaces operator new / delete; outside a
// counting scope they only forward to malloc / free). One counting scope at a time.
#ifndef FUSERANK_TESTS_ENGINE_ALLOC_COUNTER_UTIL_H_
#define FUSERANK_TESTS_ENGINE_ALLOC_COUNTER_UTIL_H_

#include <cstdint>

namespace fuserank::engine::test {

class ScopedAllocationCounter {
 public:
  ScopedAllocationCounter();
  ~ScopedAllocationCounter();
  ScopedAllocationCounter(const ScopedAllocationCounter&) = delete;
  ScopedAllocationCounter& operator=(const ScopedAllocationCounter&) = delete;

  // Allocations since construction.
  int64_t count() const;
};

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_ALLOC_COUNTER_UTIL_H_
