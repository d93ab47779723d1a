#ifndef PACELINE_COMMON_FILES_H_
#define PACELINE_COMMON_FILES_H_

// Reading a whole file, in one place for every module.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paceline {

// The file's bytes. On failure the message is "cannot read <what> '<path>':
// <the system's reason>" (`what` may be empty), with NOT_FOUND (ENOENT),
// PERMISSION_DENIED (EACCES) or INVALID_ARGUMENT (a directory, anything
// else).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path,
                                          absl::string_view what = "");

}  // namespace paceline

#endif  // PACELINE_COMMON_FILES_H_
