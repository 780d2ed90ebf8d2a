// TSan support for Debian's prebuilt Abseil, LD_PRELOADed by scripts/test-sanitize.sh into
// the TSan test runs (never linked into a product binary).
//
// Why: libabsl_synchronization.so is not built with -fsanitize=thread, so TSan cannot see
// absl::Mutex, CondVar or Notification synchronise anything (their atomics and futex calls
// are in uninstrumented code) and reports every access guarded by an absl::Mutex as a
// race. This library interposes those functions (ours, and gRPC's calls through the PLT),
// calls the real ones through dlsym(RTLD_NEXT) and tells TSan about the happens-before
// edge with __tsan_release (before a mutex is given up) and __tsan_acquire (after it is
// taken), keyed by the mutex's address. Plain acquire/release rather than TSan's mutex
// annotations: they order memory exactly as a mutex does without asking TSan to track lock
// state across a library it cannot see. The library itself is not instrumented; every
// entry point is thread-safe (the real-function lookups are function-local statics).
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

// Weak: a process without the TSan runtime (a shell the tests start) still loads this.
extern "C" void __tsan_acquire(void* addr) __attribute__((weak));
extern "C" void __tsan_release(void* addr) __attribute__((weak));

namespace {

#define FUSERANK_STR2(x) #x
#define FUSERANK_STR(x) FUSERANK_STR2(x)

#if ABSL_OPTION_USE_INLINE_NAMESPACE
constexpr char kInlineNamespace[] = FUSERANK_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
#else
constexpr char kInlineNamespace[] = "";
#endif

// The real function, by its mangled name less the "_ZN4absl<inline namespace>" prefix
// (or "_ZNK..." for const members when `is_const`).
template <typename Fn>
Fn Real(const char* suffix, bool is_const = false) {
  std::string name = is_const ? "_ZNK4absl" : "_ZN4absl";
  const std::string ns = kInlineNamespace;
  if (!ns.empty()) name += std::to_string(ns.size()) + ns;
  name += suffix;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found: %s\n", name.c_str(), dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

void Acquire(const void* addr) {
  if (__tsan_acquire != nullptr) __tsan_acquire(const_cast<void*>(addr));
}
void Release(const void* addr) {
  if (__tsan_release != nullptr) __tsan_release(const_cast<void*>(addr));
}

// Notification keeps `std::atomic<bool> notified_yet_` right after its Mutex; the inline
// HasBeenNotified() reads it with an acquire load that TSan sees, so Notify() releases on
// that address too.
const void* NotifiedFlag(const absl::Notification* n) {
  static_assert(sizeof(absl::Notification) >= sizeof(absl::Mutex) + sizeof(std::atomic<bool>));
  return reinterpret_cast<const char*>(n) + sizeof(absl::Mutex);
}

// A Condition is evaluated with the mutex held, by the waiter or by whichever thread is
// unlocking, inside absl's code where no annotation is seen; wrapping it in acquire/release
// of the mutex orders what it reads with the holders before and after.
struct WrappedCondition {
  const absl::Condition* condition;
  const absl::Mutex* mu;
};

bool EvalWrapped(WrappedCondition* w) {
  Acquire(w->mu);
  const bool result = w->condition->Eval();
  Release(w->mu);
  return result;
}

absl::Condition Wrap(const absl::Condition& condition, const absl::Mutex* mu,
                     WrappedCondition* storage) {
  *storage = {&condition, mu};
  return absl::Condition(&EvalWrapped, storage);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// ---- Mutex: acquire after taking it, release before giving it up.
void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  Acquire(this);
}
void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  Acquire(this);
}
bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) Acquire(this);
  return locked;
}
bool Mutex::ReaderTryLock() {
  static auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) Acquire(this);
  return locked;
}
void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  Release(this);
  real(this);
}
void Mutex::ReaderUnlock() {
  static auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  Release(this);
  real(this);
}
void Mutex::LockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  WrappedCondition w;
  real(this, Wrap(cond, this, &w));
  Acquire(this);
}
void Mutex::ReaderLockWhen(const Condition& cond) {
  static auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  WrappedCondition w;
  real(this, Wrap(cond, this, &w));
  Acquire(this);
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  WrappedCondition w;
  const bool result = real(this, Wrap(cond, this, &w), timeout);
  Acquire(this);  // held on return either way
  return result;
}
bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  WrappedCondition w;
  const bool result = real(this, Wrap(cond, this, &w), deadline);
  Acquire(this);
  return result;
}
bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  WrappedCondition w;
  const bool result = real(this, Wrap(cond, this, &w), timeout);
  Acquire(this);
  return result;
}
bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  WrappedCondition w;
  const bool result = real(this, Wrap(cond, this, &w), deadline);
  Acquire(this);
  return result;
}

// ---- Await and CondVar::Wait give the mutex up while they wait and take it back.
void Mutex::Await(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  Release(this);
  WrappedCondition w;
  real(this, Wrap(cond, this, &w));
  Acquire(this);
}
bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Release(this);
  WrappedCondition w;
  const bool result = real(this, Wrap(cond, this, &w), timeout);
  Acquire(this);
  return result;
}
bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Release(this);
  WrappedCondition w;
  const bool result = real(this, Wrap(cond, this, &w), deadline);
  Acquire(this);
  return result;
}
void CondVar::Wait(Mutex* mu) {
  static auto real = Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  Release(mu);
  real(this, mu);
  Acquire(mu);
}
bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Release(mu);
  const bool result = real(this, mu, timeout);
  Acquire(mu);
  return result;
}
bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static auto real =
      Real<bool (*)(CondVar*, Mutex*, Time)>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Release(mu);
  const bool result = real(this, mu, deadline);
  Acquire(mu);
  return result;
}

// ---- Notification: Notify() releases; a wait that saw the notification acquires.
void Notification::Notify() {
  static auto real = Real<void (*)(Notification*)>("12Notification6NotifyEv");
  Release(NotifiedFlag(this));
  real(this);
}
void Notification::WaitForNotification() const {
  static auto real =
      Real<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", true);
  real(this);
  Acquire(NotifiedFlag(this));
}
bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static auto real = Real<bool (*)(const Notification*, Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  const bool notified = real(this, timeout);
  if (notified) Acquire(NotifiedFlag(this));
  return notified;
}
bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static auto real = Real<bool (*)(const Notification*, Time)>(
      "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  const bool notified = real(this, deadline);
  if (notified) Acquire(NotifiedFlag(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
