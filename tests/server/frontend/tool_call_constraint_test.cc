// sampling.constraint.tool_calls through BuildRequest: the call syntax from
// the request or the chat template, the mask it compiles to, and the
// refusals, each naming its field.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "chat/model_templates.h"
#include "chat/prompt.h"
#include "engine/sampling/grammar/grammar_cache.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/sampling/row_sampling_math.h"
#include "engine/tokenizer/byte_level.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.pb.h"
#include "server/frontend/request_builder.h"

namespace paceline::server {
namespace {

constexpr int32_t kVocab = 300;  // bytes, then BOS (256) and EOS (257)

// A byte-level model with a chat template whose markers give it the
// Hermes call syntax (or, `calls` false, none).
struct Model {
  std::unique_ptr<engine::Tokenizer> tokenizer =
      engine::MakeByteLevelTokenizer(kVocab).value();
  chat::ChatPromptEncoder encoder{tokenizer.get()};
  chat::ModelChatTemplates templates;
  engine::grammar::GrammarCache grammars{
      engine::grammar::TokenTrie::FromTokenizer(*tokenizer)};

  explicit Model(bool calls = true) {
    const std::string source =
        absl::StrCat("{% for m in messages %}{{ m.content }}{% endfor %}",
                     calls ? "{# <tool_call> #}" : "");
    templates = chat::ChatTemplatesFromSource("test", source).value();
  }

  absl::StatusOr<BuiltRequest> Build(const v1::GenerateRequest& r) {
    TenantPolicy tenant;
    tenant.name = "acme";
    ModelLimits limits;
    limits.vocab_size = kVocab;
    limits.context_length = 256;
    return BuildRequest(r, tenant, *tokenizer, limits, /*seed=*/1,
                        ChatInput{&templates, &encoder, absl::UnixEpoch()},
                        &grammars);
  }
};

v1::GenerateRequest Calls(v1::ToolCalls::Mode mode, bool chat = true) {
  v1::GenerateRequest r;
  if (chat) {
    v1::ChatMessage* m = r.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content("Hi");
    r.mutable_chat()->add_tools()->mutable_function()->set_name("f");
  } else {
    r.set_text("Hi");
  }
  v1::ToolCalls* calls =
      r.mutable_sampling()->mutable_constraint()->mutable_tool_calls();
  calls->set_mode(mode);
  v1::ToolSchema* tool = calls->add_tools();
  tool->set_name("f");
  tool->set_parameters(R"({"properties": {"a": {"type": "integer"}}})");
  tool->set_strict(true);
  return r;
}

// The ids the built request's mask allows first.
std::vector<int32_t> FirstAllowed(const BuiltRequest& built) {
  std::vector<uint32_t> allowed(engine::MaskWords(kVocab));
  built.spec.sampling.mask->Clone()->Fill(absl::MakeSpan(allowed));
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < kVocab; ++id) {
    if (engine::MaskAllows(allowed.data(), id)) ids.push_back(id);
  }
  return ids;
}

TEST(ToolCallConstraintTest, TheTemplatesSyntaxByDefault) {
  Model model;
  // Required: after `<tool_call>\n` (the server's prefill), `{` only.
  absl::StatusOr<BuiltRequest> built =
      model.Build(Calls(v1::ToolCalls::MODE_REQUIRED));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(FirstAllowed(*built), std::vector<int32_t>{'{'});
  // Named: the arguments, an object.
  built = model.Build(Calls(v1::ToolCalls::MODE_NAMED));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(FirstAllowed(*built), std::vector<int32_t>{'{'});
  // Auto: free until the model opens a call.
  built = model.Build(Calls(v1::ToolCalls::MODE_AUTO));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(FirstAllowed(*built).size(), static_cast<size_t>(kVocab));
}

TEST(ToolCallConstraintTest, ASyntaxNamedInTheRequest) {
  Model model;
  v1::GenerateRequest r = Calls(v1::ToolCalls::MODE_REQUIRED, /*chat=*/false);
  // Text input has no template to take the syntax from.
  absl::StatusOr<BuiltRequest> built = model.Build(r);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(built.status().message(),
                               "sampling.constraint.tool_calls.format "))
      << built.status();
  r.mutable_sampling()->mutable_constraint()->mutable_tool_calls()->set_format(
      "llama3");
  built = model.Build(r);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(FirstAllowed(*built), std::vector<int32_t>{'f'});  // f", ...
  // A chat family's markup: Qwen3-Coder's XML after the required opening.
  r.mutable_sampling()->mutable_constraint()->mutable_tool_calls()->set_format(
      "qwen3_coder");
  built = model.Build(r);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(FirstAllowed(*built), std::vector<int32_t>{'f'});  // f>...
  r.mutable_sampling()->mutable_constraint()->mutable_tool_calls()->set_format(
      "xml");
  built = model.Build(r);
  EXPECT_TRUE(absl::StrContains(built.status().message(), "'xml'"))
      << built.status();
}

// The chat output's parameter types come from the request's tools, so an
// XML parameter is typed by its schema.
TEST(ToolCallConstraintTest, TheChatOutputKnowsTheToolsParameterTypes) {
  Model model;
  v1::GenerateRequest r = Calls(v1::ToolCalls::MODE_AUTO);
  r.mutable_chat()->mutable_tools(0)->mutable_function()->set_parameters(
      R"({"properties": {"code": {"type": "string"}, "n": {"type": "integer"}}})");
  absl::StatusOr<BuiltRequest> built = model.Build(r);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_TRUE(built->delivery.chat_output.has_value());
  const auto& types = built->delivery.chat_output->parameter_types;
  ASSERT_NE(types, nullptr);
  using Kind = chat::ToolParameterTypes::Kind;
  EXPECT_EQ(types->Find("f", "code"), Kind::kString);
  EXPECT_EQ(types->Find("f", "n"), Kind::kOther);
  EXPECT_EQ(types->Find("f", "other"), Kind::kUnknown);
}

TEST(ToolCallConstraintTest, ATemplateWithoutCalls) {
  Model model(/*calls=*/false);
  absl::StatusOr<BuiltRequest> built =
      model.Build(Calls(v1::ToolCalls::MODE_REQUIRED));
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(built.status().message(),
                                "sampling.constraint.tool_calls"));
  // Auto: no call can be parsed, so nothing to hold.
  built = model.Build(Calls(v1::ToolCalls::MODE_AUTO));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->spec.sampling.mask, nullptr);
}

TEST(ToolCallConstraintTest, Refusals) {
  Model model;
  v1::GenerateRequest r = Calls(v1::ToolCalls::MODE_REQUIRED);
  v1::ToolCalls* calls =
      r.mutable_sampling()->mutable_constraint()->mutable_tool_calls();
  calls->mutable_tools(0)->set_parameters(
      R"({"properties": {"a": {"type": "array", "contains": {}}}})");
  absl::StatusOr<BuiltRequest> built = model.Build(r);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(built.status().message(),
                               "sampling.constraint.tool_calls tool 'f' "))
      << built.status();
  EXPECT_TRUE(absl::StrContains(built.status().message(), "'contains'"));
  // Not strict: any object.
  calls->mutable_tools(0)->set_strict(false);
  EXPECT_TRUE(model.Build(r).ok());
  calls->clear_tools();
  built = model.Build(r);
  EXPECT_EQ(built.status().message(),
            "sampling.constraint.tool_calls.tools is empty");
}

}  // namespace
}  // namespace paceline::server
