#ifndef PACELINE_TESTS_TESTING_FILES_H_
#define PACELINE_TESTS_TESTING_FILES_H_

// Files for tests: paths under the test's temporary directory that no other
// test (or parallel ctest process) uses, and whole-file reads and writes.

#include <string>

#include "absl/strings/string_view.h"

namespace paceline::testing {

// A path under ::testing::TempDir() unique to this process and the running
// test: "<TempDir><pid>_<test name>_<name>". Outside a test the test name is
// left out. Nothing is created; whatever the test makes there is removed
// when it ends (outside a test: when the program ends).
std::string TempPath(absl::string_view name);

// Writes `bytes` as is to TempPath(name), replacing any file there, and
// returns the path. Adds a test failure (and still returns the path) when the
// file cannot be written.
std::string WriteFile(absl::string_view name, absl::string_view bytes);

// Writes `bytes` as is to `path`, replacing any file there; false (with a test
// failure added) when it cannot be written.
bool WriteFileAt(const std::string& path, absl::string_view bytes);

// The whole file; empty when it cannot be read.
std::string ReadFile(const std::string& path);

// Creates a fresh directory under ::testing::TempDir() whose name starts with
// `prefix` and returns its path; empty (with a test failure added) when it
// cannot be created. It is removed, with what it holds, when the test ends
// (made outside a test: when the program ends).
std::string MakeTempDir(absl::string_view prefix);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_FILES_H_
