#include "engine/cpu/cpu_simd.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cpu/cpu_fma_probe.h"

#if FUSERANK_HAVE_AVX2_PATH
#include <cpuid.h>
#endif

namespace fuserank::engine {
namespace {

// The probe: 3 rounds of 20000 iterations per width (about 0.1 ms each on a 3 GHz core);
// the best round counts, so a preempted one or the first 512-bit instructions running
// slow while the core changes its power state do not decide.
constexpr int64_t kProbeIterations = 20000;
constexpr int kProbeRounds = 3;

struct CpuFeatures {
  CpuIsa best = CpuIsa::kGeneric;
  bool avx512_bf16 = false;
};

CpuFeatures DetectFeatures() {
  CpuFeatures features;
#if FUSERANK_HAVE_AVX2_PATH
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // Every CPU with AVX2 so far has F16C; the half -> float conversion uses it.
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
    features.best = CpuIsa::kAvx2;
    // libgcc checks that the OS saves the ZMM state (XCR0) before it reports these.
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
      features.best = CpuIsa::kAvx512;
      features.avx512_bf16 = __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5));
    }
  }
#endif
  return features;
}

const CpuFeatures& Features() {
  static const CpuFeatures features = DetectFeatures();
  return features;
}

bool ParseIsa(const char* value, CpuIsa* isa) {
  for (CpuIsa candidate : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (std::strcmp(value, CpuIsaName(candidate)) == 0) {
      *isa = candidate;
      return true;
    }
  }
  return false;
}

CpuDispatch Detect() {
  const CpuFeatures& features = Features();
  const char* value = std::getenv("FUSERANK_CPU_ISA");
  if (value == nullptr && std::getenv("FUSERANK_CPU_GENERIC") != nullptr) value = "generic";
  double fma256 = 0, fma512 = 0;
  if (features.best == CpuIsa::kAvx512 && (value == nullptr || std::strcmp(value, "auto") == 0)) {
    for (int r = 0; r < kProbeRounds; ++r) {  // interleaved, so a slow moment hits both
      fma256 = std::max(fma256, MeasureFmaGflops(CpuIsa::kAvx2, kProbeIterations, 1));
      fma512 = std::max(fma512, MeasureFmaGflops(CpuIsa::kAvx512, kProbeIterations, 1));
    }
  }
  CpuDispatch dispatch = ChooseCpuIsa(features.best, fma256, fma512, value);
  dispatch.avx512_bf16 = features.avx512_bf16;
  return dispatch;
}

std::atomic<int> forced{-1};  // a CpuIsa, or -1: none

}  // namespace

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kGeneric:
      break;
  }
  return "generic";
}

CpuDispatch ChooseCpuIsa(CpuIsa best, double fma256_gflops, double fma512_gflops,
                         const char* override_value) {
  CpuDispatch d;
  d.best = best;
  d.fma256_gflops = fma256_gflops;
  d.fma512_gflops = fma512_gflops;
  d.override_value = override_value != nullptr ? override_value : "";
  if (override_value != nullptr && std::strcmp(override_value, "auto") != 0) {
    CpuIsa wanted = CpuIsa::kGeneric;
    if (!ParseIsa(override_value, &wanted)) {
      d.status = absl::InvalidArgumentError(absl::StrCat(
          "FUSERANK_CPU_ISA: '", override_value, "' is not one of auto, avx512, avx2, generic"));
    } else if (wanted > best) {
      d.status = absl::InvalidArgumentError(absl::StrCat("FUSERANK_CPU_ISA: ", override_value,
                                                         " asked for, but this CPU runs at most ",
                                                         CpuIsaName(best)));
    } else {
      d.isa = wanted;
      d.reason = absl::StrCat("forced by FUSERANK_CPU_ISA=", override_value);
      return d;
    }
  }
  d.isa = best;
  if (best == CpuIsa::kAvx512) {
    if (fma512_gflops >= kFullWidthAvx512Ratio * fma256_gflops) {
      d.reason = "512-bit FMAs measured full width";
    } else {
      d.isa = CpuIsa::kAvx2;
      d.reason =
          "AVX-512 present but 512-bit FMAs measured no faster than 256-bit "
          "(double-pumped or one 512-bit FMA pipe)";
    }
  } else {
    d.reason = best == CpuIsa::kAvx2 ? "no AVX-512" : "no AVX2+FMA";
  }
  if (!d.status.ok()) d.reason = absl::StrCat(d.reason, "; ", d.status.message());
  return d;
}

std::string CpuDispatch::Describe() const {
  std::string line = absl::StrCat("cpu isa ", CpuIsaName(isa), " (", reason, "; best supported ",
                                  CpuIsaName(best), avx512_bf16 ? ", avx512_bf16" : "");
  if (fma512_gflops > 0) {
    absl::StrAppend(&line, absl::StrFormat("; fma probe 256-bit %.1f GFLOP/s, 512-bit %.1f GFLOP/s",
                                           fma256_gflops, fma512_gflops));
  }
  return absl::StrCat(line, ")");
}

const CpuDispatch& GetCpuDispatch() {
  static const CpuDispatch dispatch = Detect();
  return dispatch;
}

CpuIsa ActiveCpuIsa() {
  const int isa = forced.load(std::memory_order_relaxed);
  return isa >= 0 ? static_cast<CpuIsa>(isa) : GetCpuDispatch().isa;
}

bool CpuSupports(CpuIsa isa) { return isa <= Features().best; }

void ForceCpuIsa(std::optional<CpuIsa> isa) {
  ABSL_RAW_CHECK(!isa.has_value() || CpuSupports(*isa), "ForceCpuIsa: this CPU lacks that ISA");
  forced.store(isa.has_value() ? static_cast<int>(*isa) : -1, std::memory_order_relaxed);
}

void ForceGenericCpuPaths(bool force) {
  ForceCpuIsa(force ? std::optional<CpuIsa>(CpuIsa::kGeneric) : std::nullopt);
}

}  // namespace fuserank::engine
