// The priority of the engine's compute threads (engine.worker_nice). On a saturated CPU the
// threads that receive, admit and refuse calls (gRPC's) must not wait behind a batch being
// computed, or a refusal meant to be sent at once waits for a batch time; so the batch
// workers and the CPU engine's helper threads run `nice` steps below the thread that
// started them (Linux's per-thread nice value; raising it needs no privilege).
// Plain functions; each acts on the calling thread only.
#ifndef FUSERANK_ENGINE_THREAD_PRIORITY_H_
#define FUSERANK_ENGINE_THREAD_PRIORITY_H_

#include "absl/status/status.h"

namespace fuserank::engine {

// The calling thread's nice value (-20..19).
int CurrentThreadNice();

// Raises the calling thread's nice value by `steps` (0..19; the result is capped at 19).
// 0 changes nothing. An error names the call and errno's text.
absl::Status LowerCurrentThreadPriority(int steps);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_THREAD_PRIORITY_H_
