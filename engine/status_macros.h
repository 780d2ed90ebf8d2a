// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status code (Abseil 20220623 has none).
#ifndef FUSERANK_ENGINE_STATUS_MACROS_H_
#define FUSERANK_ENGINE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define FUSERANK_CONCAT_INNER_(a, b) a##b
#define FUSERANK_CONCAT_(a, b) FUSERANK_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::absl::Status fuserank_status_ = (expr);            \
    if (!fuserank_status_.ok()) return fuserank_status_; \
  } while (0)

// `lhs = value of expr` or return its error status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(FUSERANK_CONCAT_(fuserank_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(*tmp)

namespace fuserank {

// Returns `status` with `context: ` prepended to its message (same code).
inline absl::Status WithContext(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), std::string(context) + ": " + std::string(status.message()));
}

}  // namespace fuserank

#endif  // FUSERANK_ENGINE_STATUS_MACROS_H_
