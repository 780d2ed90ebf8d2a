// A parameterized gtest fixture that runs each test on one ISA's code paths (the
// parameter itself, or a tuple's last element) and skips it where this CPU lacks them.
// Test helper; header only.
#ifndef FUSERANK_TESTS_ENGINE_CPU_ON_ISA_TEST_UTIL_H_
#define FUSERANK_TESTS_ENGINE_CPU_ON_ISA_TEST_UTIL_H_

#include <optional>
#include <tuple>

#include "engine/cpu/cpu_simd.h"
#include "gtest/gtest.h"

namespace fuserank::engine::test {

inline CpuIsa IsaOf(CpuIsa isa) { return isa; }
template <typename... T>
CpuIsa IsaOf(const std::tuple<T...>& param) {
  return std::get<sizeof...(T) - 1>(param);
}

template <typename Param>
class OnIsaTest : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const CpuIsa isa = IsaOf(this->GetParam());
    if (!CpuSupports(isa)) GTEST_SKIP() << "this CPU cannot run the " << CpuIsaName(isa) << " path";
    ForceCpuIsa(isa);
  }
  void TearDown() override { ForceCpuIsa(std::nullopt); }
};

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_CPU_ON_ISA_TEST_UTIL_H_
