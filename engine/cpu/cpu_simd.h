// Run-time choice of the x86 AVX2+FMA(+F16C) code paths of the CPU engine. The build
// targets the baseline ISA; hot loops are compiled twice (FUSERANK_TARGET_AVX2 and
// baseline) and picked once per process by CpuHasAvx2Fma(). Thread-safe.
#ifndef FUSERANK_ENGINE_CPU_CPU_SIMD_H_
#define FUSERANK_ENGINE_CPU_CPU_SIMD_H_

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FUSERANK_HAVE_AVX2_PATH 1
#define FUSERANK_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define FUSERANK_HAVE_AVX2_PATH 0
#define FUSERANK_TARGET_AVX2
#endif

// Forces inlining so that a generic loop body takes on the ISA of the function that
// calls it (the same body is compiled once per target).
#define FUSERANK_INLINE inline __attribute__((always_inline))

namespace fuserank::engine {

// True when the AVX2+FMA paths are in use: this CPU runs AVX2, FMA and F16C (every CPU
// with AVX2 so far has F16C; the half -> float conversion uses it), the environment
// variable FUSERANK_CPU_GENERIC is unset, and ForceGenericCpuPaths(true) is not in effect.
bool CpuHasAvx2Fma();

// Tests and benchmarks: run the baseline paths even where AVX2 is available.
void ForceGenericCpuPaths(bool force);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_SIMD_H_
