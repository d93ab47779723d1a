#include "tests/testing/files.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"

namespace paceline::testing {
namespace {

// ::testing::TempDir() with exactly one '/' at the end.
std::string TempDirWithSlash() {
  std::string dir = ::testing::TempDir();
  if (dir.empty() || dir.back() != '/') dir += '/';
  return dir;
}

}  // namespace

std::string TempPath(absl::string_view name) {
  const ::testing::TestInfo* test =
      ::testing::UnitTest::GetInstance()->current_test_info();
  if (test == nullptr) {
    return absl::StrCat(TempDirWithSlash(), getpid(), "_", name);
  }
  // A parameterized test's name has a '/' ("Case/Param"): one file name.
  return absl::StrCat(TempDirWithSlash(), getpid(), "_",
                      absl::StrReplaceAll(test->name(), {{"/", "_"}}), "_",
                      name);
}

std::string WriteFile(absl::string_view name, absl::string_view bytes) {
  const std::string path = TempPath(name);
  WriteFileAt(path, bytes);
  return path;
}

bool WriteFileAt(const std::string& path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    ADD_FAILURE() << "cannot write " << path;
    return false;
  }
  return true;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string MakeTempDir(absl::string_view prefix) {
  std::string path = absl::StrCat(TempDirWithSlash(), prefix, "XXXXXX");
  if (mkdtemp(path.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << path << ": " << std::strerror(errno);
    return "";
  }
  return path;
}

}  // namespace paceline::testing
