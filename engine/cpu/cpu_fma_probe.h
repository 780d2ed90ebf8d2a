// The FMA-throughput loop behind the CPU dispatch's probe and the peak-FLOP benchmark:
// 12 independent accumulators of fused multiply-adds, one thread, per vector width.
// Stateless; any thread.
#ifndef FUSERANK_ENGINE_CPU_CPU_FMA_PROBE_H_
#define FUSERANK_ENGINE_CPU_CPU_FMA_PROBE_H_

#include <cstdint>

#include "engine/cpu/cpu_simd.h"

namespace fuserank::engine {

// Floating-point operations of one iteration of FmaLoop at `isa` (12 FMAs of 8 or 16
// lanes, 2 FLOPs each; kGeneric: the 128-bit baseline).
int FmaLoopFlopsPerIteration(CpuIsa isa);

// Runs `iterations` iterations and returns a value that depends on all of them.
// REQUIRES: CpuSupports(isa).
float FmaLoop(CpuIsa isa, int64_t iterations);

// Best GFLOP/s of `rounds` timed runs of `iterations` each.
double MeasureFmaGflops(CpuIsa isa, int64_t iterations, int rounds);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_CPU_CPU_FMA_PROBE_H_
