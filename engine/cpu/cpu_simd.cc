#include "engine/cpu/cpu_simd.h"

#include <atomic>
#include <cstdlib>

#if FUSERANK_HAVE_AVX2_PATH
#include <cpuid.h>
#endif

namespace fuserank::engine {
namespace {

bool DetectAvx2Fma() {
#if FUSERANK_HAVE_AVX2_PATH
  if (std::getenv("FUSERANK_CPU_GENERIC") != nullptr) return false;
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
  return false;
#endif
}

std::atomic<bool> force_generic{false};

}  // namespace

bool CpuHasAvx2Fma() {
  static const bool detected = DetectAvx2Fma();
  return detected && !force_generic.load(std::memory_order_relaxed);
}

void ForceGenericCpuPaths(bool force) { force_generic.store(force, std::memory_order_relaxed); }

}  // namespace fuserank::engine
