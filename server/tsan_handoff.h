// ThreadSanitizer cannot see gRPC order a call's Finish() before its OnDone(), nor OnDone()
// before the call's messages are freed: the hand-off runs in Debian's uninstrumented gRPC
// core, often on another thread than the one that finished the call. A service that
// finishes calls off gRPC's thread (a worker, the batcher's callback) releases the call
// before Finish() and acquires it in OnDone(), so TSan sees what the finishing thread wrote
// ordered before what gRPC's thread does next; OnCancel() releases it too, gRPC running
// OnDone() after it. No-ops outside TSan builds.
#ifndef FUSERANK_SERVER_TSAN_HANDOFF_H_
#define FUSERANK_SERVER_TSAN_HANDOFF_H_

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define FUSERANK_TSAN_RELEASE(p) __tsan_release(p)
#define FUSERANK_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define FUSERANK_TSAN_RELEASE(p) static_cast<void>(p)
#define FUSERANK_TSAN_ACQUIRE(p) static_cast<void>(p)
#endif

#endif  // FUSERANK_SERVER_TSAN_HANDOFF_H_
