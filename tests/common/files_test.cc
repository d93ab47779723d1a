#include "common/files.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace paceline {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + std::to_string(getpid()) + "_" + name;
}

TEST(ReadWholeFileTest, ReturnsEveryByte) {
  const std::string path = TempPath("bytes");
  // NULs, a long run past one read's chunk, no final newline.
  std::string bytes("a\0b\r\n", 5);
  bytes += std::string(200000, 'x');
  bytes += "end";
  std::ofstream(path, std::ios::binary) << bytes;
  absl::StatusOr<std::string> read = ReadWholeFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc);
  EXPECT_EQ(ReadWholeFile(path).value_or("?"), "");
  unlink(path.c_str());
}

TEST(ReadWholeFileTest, AMissingFileIsNotFoundWithItsPathAndReason) {
  const absl::StatusOr<std::string> read =
      ReadWholeFile("/no/such/file.gguf", "config file");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(read.status().message(),
            "cannot read config file '/no/such/file.gguf': No such file or "
            "directory");
  EXPECT_EQ(ReadWholeFile("/no/such").status().message(),
            "cannot read '/no/such': No such file or directory");
}

TEST(ReadWholeFileTest, ADirectoryIsAnInvalidArgument) {
  const absl::StatusOr<std::string> read = ReadWholeFile(::testing::TempDir());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr("Is a directory"));
}

}  // namespace
}  // namespace paceline
