#include "engine/thread_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace fuserank::engine {
namespace {

// setpriority(PRIO_PROCESS, tid) acts on one thread on Linux, not on the whole process.
id_t ThreadId() { return static_cast<id_t>(syscall(SYS_gettid)); }

}  // namespace

int CurrentThreadNice() {
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, ThreadId());
  return errno == 0 ? nice : 0;
}

absl::Status LowerCurrentThreadPriority(int steps) {
  if (steps <= 0) return absl::OkStatus();
  const int target = std::min(19, CurrentThreadNice() + steps);
  if (setpriority(PRIO_PROCESS, ThreadId(), target) != 0) {
    return absl::InternalError(
        absl::StrCat("setpriority(nice ", target, ") failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace fuserank::engine
