// Run-time choice of the CPU engine's x86 code paths: one per ISA (AVX-512, AVX2+FMA,
// baseline). The build targets the baseline ISA; hot loops are compiled once per target
// with function attributes (FUSERANK_TARGET_AVX512, FUSERANK_TARGET_AVX2) and picked by
// ActiveCpuIsa(), so the binary runs on any x86-64 CPU. The choice is made once per
// process (GetCpuDispatch) from CPUID, a short FMA-throughput probe (512-bit FMAs are used
// only where they measure clearly faster than 256-bit ones: not on double-pumped cores)
// and the FUSERANK_CPU_ISA environment variable. Thread-safe.
#ifndef FUSERANK_ENGINE_CPU_CPU_SIMD_H_
#define FUSERANK_ENGINE_CPU_CPU_SIMD_H_

#include <optional>
#include <string>

#include "absl/status/status.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FUSERANK_HAVE_AVX2_PATH 1
#define FUSERANK_HAVE_AVX512_PATH 1
#define FUSERANK_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define FUSERANK_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")))
#else
#define FUSERANK_HAVE_AVX2_PATH 0
#define FUSERANK_HAVE_AVX512_PATH 0
#define FUSERANK_TARGET_AVX2
#define FUSERANK_TARGET_AVX512
#endif

// Forces inlining so that a generic loop body takes on the ISA of the function that
// calls it (the same body is compiled once per target).
#define FUSERANK_INLINE inline __attribute__((always_inline))

namespace fuserank::engine {

// Ordered: a CPU that runs one runs those below it.
enum class CpuIsa : int { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };

// "generic", "avx2", "avx512": the names of FUSERANK_CPU_ISA, logs and /metrics.
const char* CpuIsaName(CpuIsa isa);

// 512-bit FMAs count as full width when they measure at least this many times the
// FLOP rate of 256-bit ones (2.0 on a core with two 512-bit FMA pipes, ~1.0 where they
// are double-pumped or there is one 512-bit pipe).
inline constexpr double kFullWidthAvx512Ratio = 1.4;

// What the process found and chose, once, at the first call of GetCpuDispatch().
struct CpuDispatch {
  CpuIsa isa = CpuIsa::kGeneric;   // the kernels in use (unless ForceCpuIsa)
  CpuIsa best = CpuIsa::kGeneric;  // the best path this CPU can run
  bool avx512_bf16 = false;        // AVX512_BF16 (not used by the kernels yet)
  // The FMA probe (0 when not run: no AVX-512 or an override): best GFLOP/s of a
  // 12-accumulator FMA loop, one thread, with 256-bit and 512-bit vectors.
  double fma256_gflops = 0;
  double fma512_gflops = 0;
  std::string override_value;  // FUSERANK_CPU_ISA as set ("" unset)
  // Not OK when FUSERANK_CPU_ISA names no ISA or one this CPU lacks; the choice is then
  // the automatic one, and the server refuses to start.
  absl::Status status;
  std::string reason;  // why `isa`, one phrase

  // One line for the logs: "cpu isa avx512 (...)".
  std::string Describe() const;
};

// The process's choice (thread-safe; probes on the first call, under a millisecond).
const CpuDispatch& GetCpuDispatch();

// Pure part of the choice, for tests: the ISA picked for a CPU that runs up to `best`,
// with the measured FMA rates and the FUSERANK_CPU_ISA value (nullptr: unset).
CpuDispatch ChooseCpuIsa(CpuIsa best, double fma256_gflops, double fma512_gflops,
                         const char* override_value);

// The paths the kernels take now: GetCpuDispatch().isa, or the ISA forced below.
CpuIsa ActiveCpuIsa();

// True when the AVX2+FMA (or wider) paths are in use.
inline bool CpuHasAvx2Fma() { return ActiveCpuIsa() >= CpuIsa::kAvx2; }

// True when this CPU can run `isa`'s paths (CPUID, and the OS saves the vector state).
bool CpuSupports(CpuIsa isa);

// Tests and benchmarks: run `isa`'s paths (nullopt: back to the process's choice).
// REQUIRES: CpuSupports(*isa).
void ForceCpuIsa(std::optional<CpuIsa> isa);

// Tests: ForceCpuIsa(kGeneric) when `force`, else ForceCpuIsa(nullopt).
void ForceGenericCpuPaths(bool force);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_SIMD_H_
