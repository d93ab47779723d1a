#include "tests/testing/gguf_edit.h"

#include <cstring>
#include <string>

#include "engine/gguf/gguf_file.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::testing {
namespace {

TEST(GgufEditTest, AddedStringsReadBackAndTensorsKeepTheirBytes) {
  if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
  auto original = engine::GgufFile::Open(kStories260KPath);
  ASSERT_TRUE(original.ok()) << original.status();
  const std::string bytes = ReadFile(kStories260KPath);
  for (const std::string& value : {std::string("x"), std::string(100, 'y'),
                                   std::string("{{ messages }}\n")}) {
    auto edited = AddStringMetadata(
        bytes, {{"tokenizer.chat_template", value}, {"a.b", "c"}});
    ASSERT_TRUE(edited.ok()) << edited.status();
    auto file = engine::GgufFile::FromBuffer(
        reinterpret_cast<const uint8_t*>(edited->data()), edited->size());
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(*(*file)->GetString("tokenizer.chat_template"), value);
    EXPECT_EQ(*(*file)->GetString("a.b"), "c");
    EXPECT_EQ((*file)->metadata().size(), (*original)->metadata().size() + 3);
    ASSERT_EQ((*file)->tensors().size(), (*original)->tensors().size());
    for (size_t i = 0; i < (*file)->tensors().size(); ++i) {
      const auto& a = (*original)->tensors()[i];
      const auto& b = (*file)->tensors()[i];
      ASSERT_EQ(a.size_bytes, b.size_bytes);
      EXPECT_EQ(std::memcmp(a.data, b.data, a.size_bytes), 0) << a.name;
    }
  }
}

TEST(GgufEditTest, RefusesBytesThatAreNotGguf) {
  EXPECT_FALSE(AddStringMetadata("not a gguf file at all", {{"k", "v"}}).ok());
}

}  // namespace
}  // namespace paceline::testing
