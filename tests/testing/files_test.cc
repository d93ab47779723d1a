// TempPath, WriteFile, ReadFile and MakeTempDir on the real file system.

#include "tests/testing/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace paceline::testing
