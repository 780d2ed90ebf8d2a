#include "engine/cpu_simd.h"

#include <atomic>
#include <cstdlib>

namespace fuserank::engine {
namespace {

bool DetectAvx2Fma() {
#if FUSERANK_HAVE_AVX2_PATH
  if (std::getenv("FUSERANK_CPU_GENERIC") != nullptr) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
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
