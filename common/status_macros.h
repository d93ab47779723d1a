#ifndef PACELINE_COMMON_STATUS_MACROS_H_
#define PACELINE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Abseil ships no public RETURN_IF_ERROR / ASSIGN_OR_RETURN; these are the
// project's only copies. Both evaluate their argument exactly once.

#define PACELINE_STATUS_CONCAT_INNER_(a, b) a##b
#define PACELINE_STATUS_CONCAT_(a, b) PACELINE_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                         \
  do {                                                \
    const ::absl::Status paceline_status_ = (expr);   \
    if (!paceline_status_.ok()) return paceline_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F());` declares/assigns `x` from an OK StatusOr,
// or returns its status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr)                                        \
  PACELINE_ASSIGN_OR_RETURN_IMPL_(                                         \
      PACELINE_STATUS_CONCAT_(paceline_statusor_, __LINE__), lhs, expr)

#define PACELINE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                    \
  if (!statusor.ok()) return std::move(statusor).status();   \
  lhs = *std::move(statusor)

#endif  // PACELINE_COMMON_STATUS_MACROS_H_
