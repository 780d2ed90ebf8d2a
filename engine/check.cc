#include "engine/check.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace fuserank::check_internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition)
    : file_(file), line_(line), condition_(condition) {}

CheckFailure::~CheckFailure() {
  const std::string message = stream_.str();
  // One write, so that the lines of two failing threads do not interleave.
  std::fprintf(stderr, "%s:%d: check failed: %s%s%s\n", file_, line_, condition_,
               message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace fuserank::check_internal
