// The CPU engine's ISA dispatch: the choice from CPUID, the FMA probe and the
// FUSERANK_CPU_ISA override (ChooseCpuIsa, pure), the process's own choice, and forcing a
// path for tests.
#include "engine/cpu/cpu_simd.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "engine/cpu/cpu_fma_probe.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

TEST(ChooseCpuIsaTest, FullWidthAvx512IsChosen) {
  const CpuDispatch d = ChooseCpuIsa(CpuIsa::kAvx512, 140.0, 270.0, nullptr);
  EXPECT_TRUE(d.status.ok());
  EXPECT_EQ(d.isa, CpuIsa::kAvx512);
  EXPECT_EQ(d.best, CpuIsa::kAvx512);
}

TEST(ChooseCpuIsaTest, DoublePumpedAvx512FallsBackToAvx2) {
  // Zen 4: 512-bit FMAs run as two 256-bit halves, the same FLOP rate.
  const CpuDispatch d = ChooseCpuIsa(CpuIsa::kAvx512, 140.0, 145.0, nullptr);
  EXPECT_TRUE(d.status.ok());
  EXPECT_EQ(d.isa, CpuIsa::kAvx2);
  EXPECT_NE(d.reason.find("double-pumped"), std::string::npos) << d.reason;
  EXPECT_NE(d.Describe().find("fma probe"), std::string::npos) << d.Describe();
}

TEST(ChooseCpuIsaTest, RatioThresholdIsInclusive) {
  EXPECT_EQ(ChooseCpuIsa(CpuIsa::kAvx512, 100.0, 100.0 * kFullWidthAvx512Ratio, nullptr).isa,
            CpuIsa::kAvx512);
  EXPECT_EQ(ChooseCpuIsa(CpuIsa::kAvx512, 100.0, 100.0 * kFullWidthAvx512Ratio - 1, nullptr).isa,
            CpuIsa::kAvx2);
}

TEST(ChooseCpuIsaTest, WithoutAvx512TheBestSupportedPathIsChosen) {
  EXPECT_EQ(ChooseCpuIsa(CpuIsa::kAvx2, 0, 0, nullptr).isa, CpuIsa::kAvx2);
  EXPECT_EQ(ChooseCpuIsa(CpuIsa::kGeneric, 0, 0, nullptr).isa, CpuIsa::kGeneric);
  EXPECT_EQ(ChooseCpuIsa(CpuIsa::kAvx2, 0, 0, "auto").isa, CpuIsa::kAvx2);
}

TEST(ChooseCpuIsaTest, OverrideForcesASupportedPath) {
  for (const char* name : {"avx2", "generic", "avx512"}) {
    const CpuDispatch d = ChooseCpuIsa(CpuIsa::kAvx512, 140.0, 145.0, name);
    EXPECT_TRUE(d.status.ok()) << name;
    EXPECT_EQ(std::string(CpuIsaName(d.isa)), name);
    EXPECT_EQ(d.override_value, name);
    EXPECT_NE(d.reason.find("forced"), std::string::npos) << d.reason;
  }
}

TEST(ChooseCpuIsaTest, OverrideAboveTheCpuIsAnErrorAndIgnoredForTheChoice) {
  const CpuDispatch d = ChooseCpuIsa(CpuIsa::kAvx2, 0, 0, "avx512");
  EXPECT_EQ(d.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status.message().find("at most avx2"), std::string::npos) << d.status;
  EXPECT_EQ(d.isa, CpuIsa::kAvx2);
}

TEST(ChooseCpuIsaTest, UnknownOverrideIsAnError) {
  const CpuDispatch d = ChooseCpuIsa(CpuIsa::kAvx512, 140.0, 270.0, "avx1024");
  EXPECT_EQ(d.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status.message().find("avx1024"), std::string::npos) << d.status;
  EXPECT_EQ(d.isa, CpuIsa::kAvx512);
}

TEST(CpuDispatchTest, ProcessChoiceIsSupportedAndForceable) {
  const CpuDispatch& d = GetCpuDispatch();
  std::printf("%s\n", d.Describe().c_str());
  EXPECT_TRUE(CpuSupports(d.best));
  EXPECT_LE(d.isa, d.best);
  EXPECT_EQ(&GetCpuDispatch(), &d);  // once per process
  EXPECT_NE(d.Describe().find(CpuIsaName(d.isa)), std::string::npos);
  for (CpuIsa isa : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!CpuSupports(isa)) continue;
    ForceCpuIsa(isa);
    EXPECT_EQ(ActiveCpuIsa(), isa);
    EXPECT_EQ(CpuHasAvx2Fma(), isa >= CpuIsa::kAvx2);
  }
  ForceCpuIsa(std::nullopt);
  EXPECT_EQ(ActiveCpuIsa(), d.isa);
  ForceGenericCpuPaths(true);
  EXPECT_EQ(ActiveCpuIsa(), CpuIsa::kGeneric);
  ForceGenericCpuPaths(false);
  EXPECT_EQ(ActiveCpuIsa(), d.isa);
}

TEST(CpuDispatchTest, ProbeRanWhereAvx512IsPresent) {
  const CpuDispatch& d = GetCpuDispatch();
  if (d.best != CpuIsa::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU: no probe";
  if (!d.override_value.empty()) GTEST_SKIP() << "FUSERANK_CPU_ISA is set: no probe";
  EXPECT_GT(d.fma256_gflops, 0);
  EXPECT_GT(d.fma512_gflops, 0);
}

TEST(FmaProbeTest, EveryPathThisCpuRunsMeasures) {
  for (CpuIsa isa : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!CpuSupports(isa)) {
      std::printf("[  SKIP    ] no %s on this CPU\n", CpuIsaName(isa));
      continue;
    }
    EXPECT_GT(MeasureFmaGflops(isa, 1000, 1), 0) << CpuIsaName(isa);
    EXPECT_TRUE(std::isfinite(FmaLoop(isa, 1000))) << CpuIsaName(isa);
  }
  EXPECT_EQ(FmaLoopFlopsPerIteration(CpuIsa::kAvx512), 12 * 16 * 2);
  EXPECT_EQ(FmaLoopFlopsPerIteration(CpuIsa::kAvx2), 12 * 8 * 2);
}

}  // namespace
}  // namespace fuserank::engine
