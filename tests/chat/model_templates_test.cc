// Which chat templates a model has: the GGUF keys present, absent, empty,
// of the wrong type, malformed (with line and column), the tool_use and
// other named variants, and the config's file in their place. Tests that
// need a parsed template skip while the interpreter refuses every template.

#include "chat/model_templates.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "engine/gguf/gguf_file.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_builder.h"

namespace paceline::chat {
namespace {

using ::paceline::engine::ChatTemplateSource;
using ::paceline::engine::ChatTemplateSources;
using ::paceline::engine::GgufFile;
using ::paceline::testing::GgufBuilder;
using ::paceline::testing::Str;
using ::paceline::testing::U32;

constexpr char kChatMl[] =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "<|im_end|>\n{% endfor %}";
constexpr char kMalformed[] = "hello\n{% if %}";

bool Contains(absl::string_view text, absl::string_view part) {
  return absl::StrContains(text, part);
}

// Holds the bytes the GgufFile views.
struct Built {
  std::string bytes;
  std::unique_ptr<GgufFile> file;
};

// The file's templates as the loader and the daemon read them.
absl::StatusOr<ModelChatTemplates> ChatTemplatesFromGguf(
    const GgufFile& file) {
  absl::StatusOr<ChatTemplateSources> sources =
      ChatTemplateSourcesFromGguf(file);
  if (!sources.ok()) return sources.status();
  return ParseChatTemplates(*sources);
}

Built Build(const GgufBuilder& builder) {
  Built b;
  b.bytes = builder.Build();
  auto file = GgufFile::FromBuffer(
      reinterpret_cast<const uint8_t*>(b.bytes.data()), b.bytes.size());
  EXPECT_TRUE(file.ok()) << file.status();
  if (file.ok()) b.file = *std::move(file);
  return b;
}

TEST(ModelChatTemplatesTest, AbsentMeansNone) {
  GgufBuilder builder;
  builder.Add("general.architecture", Str("llama"));
  Built b = Build(builder);
  ASSERT_NE(b.file, nullptr);
  auto t = ChatTemplatesFromGguf(*b.file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->source, ChatTemplateSource::kNone);
  EXPECT_EQ(t->For(false), nullptr);
  EXPECT_EQ(t->For(true), nullptr);
  EXPECT_TRUE(t->warnings.empty());
  EXPECT_EQ(ChatTemplateSourceName(t->source), "");
}

TEST(ModelChatTemplatesTest, PresentLoads) {
  GgufBuilder builder;
  builder.Add("tokenizer.chat_template", Str(kChatMl));
  Built b = Build(builder);
  ASSERT_NE(b.file, nullptr);
  auto t = ChatTemplatesFromGguf(*b.file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->source, ChatTemplateSource::kModel);
  EXPECT_EQ(ChatTemplateSourceName(t->source), "model");
  ASSERT_NE(t->For(false), nullptr);
  EXPECT_EQ(t->For(true), t->For(false));  // no tool_use variant
  EXPECT_FALSE(t->tool_use.has_value());
  EXPECT_TRUE(t->warnings.empty());
}

TEST(ModelChatTemplatesTest, ToolUseVariantForRequestsWithTools) {
  GgufBuilder builder;
  builder.Add("tokenizer.chat_template", Str(kChatMl));
  builder.Add("tokenizer.chat_template.tool_use", Str("{{ tools }}"));
  Built b = Build(builder);
  ASSERT_NE(b.file, nullptr);
  auto t = ChatTemplatesFromGguf(*b.file);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(t->tool_use.has_value());
  EXPECT_EQ(t->For(true), &*t->tool_use);
  EXPECT_EQ(t->For(false), &*t->main);
}

TEST(ModelChatTemplatesTest, ToolUseAloneIsNotUsed) {
  GgufBuilder builder;
  builder.Add("tokenizer.chat_template.tool_use", Str(kChatMl));
  Built b = Build(builder);
  ASSERT_NE(b.file, nullptr);
  auto t = ChatTemplatesFromGguf(*b.file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->source, ChatTemplateSource::kNone);
  EXPECT_EQ(t->For(true), nullptr);
  ASSERT_EQ(t->warnings.size(), 1u);
  EXPECT_TRUE(Contains(t->warnings[0], "tokenizer.chat_template.tool_use"));
}

TEST(ModelChatTemplatesTest, OtherNamedVariantsAreNamedInAWarning) {
  GgufBuilder builder;
  builder.Add("tokenizer.chat_template.rag", Str(kChatMl));
  builder.Add("tokenizer.chat_template.default", Str(kChatMl));
  Built b = Build(builder);
  ASSERT_NE(b.file, nullptr);
  auto t = ChatTemplatesFromGguf(*b.file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->source, ChatTemplateSource::kNone);
  ASSERT_EQ(t->warnings.size(), 1u);
  EXPECT_TRUE(Contains(t->warnings[0], "tokenizer.chat_template.rag"));
  EXPECT_TRUE(Contains(t->warnings[0], "tokenizer.chat_template.default"));
}

TEST(ModelChatTemplatesTest, EmptyIsNoneWithAWarning) {
  GgufBuilder builder;
  builder.Add("tokenizer.chat_template", Str(""));
  Built b = Build(builder);
  ASSERT_NE(b.file, nullptr);
  auto t = ChatTemplatesFromGguf(*b.file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->source, ChatTemplateSource::kNone);
  ASSERT_EQ(t->warnings.size(), 1u);
  EXPECT_TRUE(Contains(t->warnings[0], "empty"));
}

TEST(ModelChatTemplatesTest, NotAStringNamesTheKey) {
  for (const char* key :
       {"tokenizer.chat_template", "tokenizer.chat_template.tool_use"}) {
    GgufBuilder builder;
    builder.Add(key, U32(7));
    Built b = Build(builder);
    ASSERT_NE(b.file, nullptr);
    auto t = ChatTemplatesFromGguf(*b.file);
    ASSERT_FALSE(t.ok()) << key;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(t.status().message(), key)) << t.status();
  }
}

TEST(ModelChatTemplatesTest, MalformedFailsWithKeyLineAndColumn) {
  for (const char* key :
       {"tokenizer.chat_template", "tokenizer.chat_template.tool_use"}) {
    GgufBuilder builder;
    const bool main = absl::string_view(key) == "tokenizer.chat_template";
    if (!main) builder.Add("tokenizer.chat_template", Str(kChatMl));
    builder.Add(key, Str(kMalformed));
    Built b = Build(builder);
    ASSERT_NE(b.file, nullptr);
    auto t = ChatTemplatesFromGguf(*b.file);
    ASSERT_FALSE(t.ok()) << key;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(t.status().message());
    EXPECT_TRUE(absl::StartsWith(message, absl::StrCat(key, ": "))) << message;
    EXPECT_TRUE(Contains(message, "line 2, column ")) << message;
  }
}

TEST(ModelChatTemplatesTest, FromSourceIsTheConfigs) {
  auto t = ChatTemplatesFromSource("/etc/chat.jinja", kChatMl);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->source, ChatTemplateSource::kConfig);
  EXPECT_EQ(ChatTemplateSourceName(t->source), "config");
  EXPECT_NE(t->For(false), nullptr);
  EXPECT_FALSE(t->tool_use.has_value());
  auto bad = ChatTemplatesFromSource("/etc/chat.jinja", kMalformed);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StartsWith(bad.status().message(),
                               "/etc/chat.jinja: chat template: line 2, "))
      << bad.status();
}

}  // namespace
}  // namespace paceline::chat
