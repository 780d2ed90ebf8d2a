// FUSERANK_CHECK: a broken internal invariant aborts the process with file, line, the
// condition and a message. Input that a request or a file can reach is validated into an
// absl::Status instead (engine/batch_validation.h for batches); a check is for what that
// validation, or the code around the check, already guarantees. Abseil 20220623 has no
// ABSL_CHECK; this is ours. Thread-safe; costs one branch when the condition holds.
//
//   FUSERANK_CHECK(worker < num_workers()) << "no worker " << worker;
#ifndef FUSERANK_ENGINE_CHECK_H_
#define FUSERANK_ENGINE_CHECK_H_

#include <ostream>
#include <sstream>

namespace fuserank::check_internal {

// Collects the message of a failed check; its destructor prints it to stderr and aborts.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure();

  std::ostream& stream() { return stream_; }

 private:
  const char* const file_;
  const int line_;
  const char* const condition_;
  std::ostringstream stream_;  // the message after the condition
};

}  // namespace fuserank::check_internal

// Aborts unless `condition` holds; `<<` after it adds to the message, and is evaluated
// only when the check fails. A statement, safe in an unbraced if/else.
#define FUSERANK_CHECK(condition)           \
  while (__builtin_expect(!(condition), 0)) \
  ::fuserank::check_internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#endif  // FUSERANK_ENGINE_CHECK_H_
