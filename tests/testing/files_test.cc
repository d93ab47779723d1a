// TempPath, WriteFile, ReadFile and MakeTempDir on the real file system.

#include "tests/testing/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "tests/testing/run_command.h"

namespace paceline::testing {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(FilesTest, TempPathIsUniquePerProcessAndTest) {
  const std::string path = TempPath("a.txt");
  EXPECT_THAT(path, StartsWith(::testing::TempDir()));
  EXPECT_THAT(path, HasSubstr(absl::StrCat(getpid(), "_")));
  EXPECT_THAT(path, HasSubstr("TempPathIsUniquePerProcessAndTest"));
  EXPECT_THAT(path, EndsWith("_a.txt"));
}

TEST(FilesTest, WriteFileKeepsEveryByteAndReplaces) {
  const std::string bytes("GGUF\x03\x00\x00\x00 tail", 13);
  const std::string path = WriteFile("bytes.bin", bytes);
  EXPECT_EQ(path, TempPath("bytes.bin"));
  EXPECT_EQ(ReadFile(path), bytes);
  WriteFile("bytes.bin", "short");
  EXPECT_EQ(ReadFile(path), "short");
  std::filesystem::remove(path);
}

TEST(FilesTest, UnwritableAndUnreadablePaths) {
  EXPECT_EQ(ReadFile("/nonexistent/dir/file"), "");
  bool written = true;
  EXPECT_NONFATAL_FAILURE(written = WriteFileAt("/nonexistent/dir/file", "x"),
                          "cannot write /nonexistent/dir/file");
  EXPECT_FALSE(written);
}

TEST(FilesTest, MakeTempDirCreatesAFreshDirectory) {
  const std::string a = MakeTempDir("files_test_");
  const std::string b = MakeTempDir("files_test_");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_NE(a, b);
  EXPECT_TRUE(std::filesystem::is_directory(a));
  EXPECT_THAT(a, HasSubstr("files_test_"));
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}

// Run only by the next test, in a process of its own: makes a file and a
// directory holding one, and prints their paths.
TEST(FilesTest, DISABLED_MakesAFileAndADirectory) {
  const std::string file = WriteFile("left.txt", "x");
  const std::string dir = MakeTempDir("files_test_left_");
  ASSERT_TRUE(WriteFileAt(dir + "/inner.txt", "y"));
  std::cout << file << "\n" << dir << "\n";
}

// CI's /tmp is shared with other runs: what a test made is gone once the
// test has ended.
TEST(FilesTest, WhatATestMadeIsRemovedWhenItEnds) {
  const CommandResult r =
      RunCommand({"/proc/self/exe", "--gtest_also_run_disabled_tests",
                  "--gtest_filter=FilesTest.DISABLED_MakesAFileAndADirectory"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  int made = 0;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    if (!absl::StartsWith(line, ::testing::TempDir())) continue;
    ++made;
    EXPECT_FALSE(std::filesystem::exists(std::string(line))) << line;
  }
  EXPECT_EQ(made, 2) << r.out;
}

}  // namespace
}  // namespace paceline::testing
