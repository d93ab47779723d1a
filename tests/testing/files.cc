#include "tests/testing/files.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
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

// What TempPath names for the running test ("<pid>_<test>_"), or for no
// test ("<pid>_").
std::string TempPrefix() {
  const ::testing::TestInfo* test =
      ::testing::UnitTest::GetInstance()->current_test_info();
  if (test == nullptr) return absl::StrCat(getpid(), "_");
  // A parameterized test's name has a '/' ("Case/Param"): one file name.
  return absl::StrCat(getpid(), "_",
                      absl::StrReplaceAll(test->name(), {{"/", "_"}}), "_");
}

// Removes every entry of the temporary directory whose name starts with
// `prefix`, and the directories in `dirs` (emptied).
void RemoveTempFiles(const std::string& prefix,
                     std::vector<std::string>* dirs) {
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(TempDirWithSlash(), ec)) {
    if (absl::StartsWith(entry.path().filename().string(), prefix)) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
  for (const std::string& dir : *dirs) std::filesystem::remove_all(dir, ec);
  dirs->clear();
}

// Removes what a test made through this file when it ends, and what was
// made outside any test when the program ends: CI runs on a machine whose
// /tmp other runs share.
class TempCleaner : public ::testing::EmptyTestEventListener {
 public:
  // MakeTempDir's directories: of the running test, and of none.
  std::vector<std::string> test_dirs;
  std::vector<std::string> program_dirs;

 private:
  void OnTestEnd(const ::testing::TestInfo&) override {
    RemoveTempFiles(TempPrefix(), &test_dirs);
  }
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    RemoveTempFiles(absl::StrCat(getpid(), "_"), &program_dirs);
  }
};

// Registered when this file is linked in (a test that makes files uses
// it); gtest owns it.
TempCleaner* const cleaner = [] {
  auto* listener = new TempCleaner;
  ::testing::UnitTest::GetInstance()->listeners().Append(listener);
  return listener;
}();

}  // namespace

std::string TempPath(absl::string_view name) {
  return absl::StrCat(TempDirWithSlash(), TempPrefix(), name);
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
  const bool in_test =
      ::testing::UnitTest::GetInstance()->current_test_info() != nullptr;
  (in_test ? cleaner->test_dirs : cleaner->program_dirs).push_back(path);
  return path;
}

}  // namespace paceline::testing
