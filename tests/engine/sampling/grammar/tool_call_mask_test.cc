// ToolCallMask (tool_call_mask.h) on a small vocabulary of text tokens and
// control tokens: the call grammar's mask with marker tokens, and the lazy
// mask of tool_choice auto — free until a trigger, outside reasoning, then
// the call, then only end of generation.

#include "engine/sampling/grammar/tool_call_mask.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/sampling/grammar/tool_call_grammar.h"
#include "engine/sampling/row_sampling_math.h"
#include "gtest/gtest.h"

namespace paceline::engine::grammar {
namespace {

// Ids: 0 EOS; 1.. the texts below; then one token per printable ASCII byte
// and '\n'. Empty texts are control tokens.
const std::vector<std::string> kTexts = {
    "",  // 0: EOS
    "<tool_call>",
    "",  // 2: [TOOL_CALLS] (a control token)
    "",  // 3: [ARGS]
    "",  // 4: <|python_tag|>
    "",  // 5: [THINK]
    "<tool",
    "_call>",
    "_call>\n{\"",
    "_call>X",
    "hello",
    "<think>",
    "</think>",
    "{\"",
    "a\": 1}",
    "}\n</tool_call>",
    "\n",
};
constexpr int32_t kEos = 0, kToolCall = 1, kToolCalls = 2, kArgs = 3,
                  kPythonTag = 4, kThink = 5;

class Vocab {
 public:
  Vocab() {
    std::vector<std::string> bytes = kTexts;
    for (int c = 0x20; c < 0x7F; ++c) bytes.push_back(std::string(1, c));
    for (size_t id = 0; id < bytes.size(); ++id) {
      if (!bytes[id].empty() && !ids_.count(bytes[id])) ids_[bytes[id]] = id;
    }
    trie_ = TokenTrie::Create(std::move(bytes), {kEos});
  }
  int32_t Id(const std::string& text) const { return ids_.at(text); }
  const std::shared_ptr<const TokenTrie>& trie() const { return trie_; }

 private:
  std::map<std::string, int32_t> ids_;
  std::shared_ptr<const TokenTrie> trie_;
};

const Vocab& V() {
  static const Vocab* vocab = new Vocab();
  return *vocab;
}

std::unique_ptr<ToolCallMask> MakeMask(ToolCallSyntax syntax, ToolCallMode mode,
                                       ToolCallMaskOptions options = {}) {
  ToolCallSpec spec;
  spec.syntax = syntax;
  spec.mode = mode;
  spec.tools = {{"f",
                 R"({"type": "object", "properties": {"a": {"type":
                     "integer"}}, "required": ["a"],
                     "additionalProperties": false})",
                 true}};
  absl::StatusOr<Grammar> g = ToolCallGrammar(ToolCallSpecText(spec));
  EXPECT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> c = Compile(*g);
  EXPECT_TRUE(c.ok()) << c.status();
  options.marker_tokens = {{kToolCalls, "[TOOL_CALLS]"},
                           {kArgs, "[ARGS]"},
                           {kPythonTag, "<|python_tag|>"}};
  if (mode == ToolCallMode::kAuto) options.triggers = ToolCallTriggers(syntax);
  auto mask = ToolCallMask::Create(std::make_shared<MaskTables>(*c, V().trie()),
                                   std::move(options));
  EXPECT_TRUE(mask.ok()) << mask.status();
  return mask.ok() ? *std::move(mask) : nullptr;
}

std::vector<uint32_t> Fill(ToolCallMask& m) {
  std::vector<uint32_t> allowed(MaskWords(V().trie()->vocab_size()));
  m.Fill(absl::MakeSpan(allowed));
  return allowed;
}

bool Allows(ToolCallMask& m, int32_t id) {
  std::vector<uint32_t> allowed = Fill(m);
  return (allowed[id >> 5] >> (id & 31)) & 1;
}

int Count(ToolCallMask& m) {
  int n = 0;
  std::vector<uint32_t> allowed = Fill(m);
  for (int32_t id = 0; id < V().trie()->vocab_size(); ++id) {
    n += (allowed[id >> 5] >> (id & 31)) & 1;
  }
  return n;
}

// Accepts each text's token (one of kTexts or a single byte).
void Write(ToolCallMask& m, const std::vector<std::string>& texts) {
  for (const std::string& text : texts) {
    const int32_t id = V().Id(text);
    ASSERT_TRUE(Allows(m, id)) << "'" << text << "'";
    ASSERT_TRUE(m.Accept(id).ok()) << "'" << text << "'";
  }
}

void WriteBytes(ToolCallMask& m, const std::string& text) {
  for (char c : text) Write(m, {std::string(1, c)});
}

TEST(ToolCallMaskTest, NamedHoldsTheArgumentsThenOnlyTheEnd) {
  auto m = MakeMask(ToolCallSyntax::kHermes, ToolCallMode::kNamed);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->in_call());
  EXPECT_FALSE(Allows(*m, kEos));
  EXPECT_FALSE(Allows(*m, V().Id("hello")));
  EXPECT_FALSE(m->Accept(V().Id("hello")).ok());
  Write(*m, {"{\"", "a"});
  EXPECT_FALSE(Allows(*m, V().Id("b")));
  WriteBytes(*m, "\": 12}");
  EXPECT_FALSE(Allows(*m, kEos));  // the closing first
  EXPECT_FALSE(Allows(*m, V().Id("\n")));
  WriteBytes(*m, "}\n</tool_call>");
  EXPECT_EQ(Count(*m), 1);
  EXPECT_TRUE(Allows(*m, kEos));
  ASSERT_TRUE(m->Accept(kEos).ok());
  EXPECT_TRUE(m->ended());
  EXPECT_EQ(Count(*m), 0);
}

TEST(ToolCallMaskTest, MarkerTokensWhereTheGrammarReadsTheirText) {
  auto m = MakeMask(ToolCallSyntax::kMistralArgs, ToolCallMode::kRequired);
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(Allows(*m, kArgs));
  Write(*m, {"f"});
  EXPECT_TRUE(Allows(*m, kArgs));        // the control token
  EXPECT_TRUE(Allows(*m, V().Id("[")));  // or its text, spelled out
  EXPECT_FALSE(Allows(*m, kToolCalls));
  ASSERT_TRUE(m->Accept(kArgs).ok());
  EXPECT_FALSE(Allows(*m, kArgs));
  Write(*m, {"{\"", "a\": 1}"});
  EXPECT_TRUE(Allows(*m, kEos));
  EXPECT_FALSE(Allows(*m, kToolCalls));  // one call without parallel
}

TEST(ToolCallMaskTest, AutoIsFreeUntilTheTrigger) {
  auto m = MakeMask(ToolCallSyntax::kHermes, ToolCallMode::kAuto);
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->in_call());
  EXPECT_EQ(Count(*m), V().trie()->vocab_size());
  Write(*m, {"hello", " ", "{\"", "\n"});
  EXPECT_FALSE(m->in_call());
  EXPECT_TRUE(Allows(*m, kEos));
  Write(*m, {"<tool_call>"});
  EXPECT_TRUE(m->in_call());
  EXPECT_FALSE(Allows(*m, kEos));
  EXPECT_FALSE(Allows(*m, V().Id("hello")));
  Write(*m, {"\n", "{\""});
  WriteBytes(*m, "name\": \"f\", \"arguments\": ");
  Write(*m, {"{\"", "a\": 1}", "}\n</tool_call>"});
  EXPECT_EQ(Count(*m), 1);
  EXPECT_TRUE(m->Accept(kEos).ok());
}

TEST(ToolCallMaskTest, ATokenThatOpensACallMustGoOnInTheGrammar) {
  auto m = MakeMask(ToolCallSyntax::kHermes, ToolCallMode::kAuto);
  ASSERT_NE(m, nullptr);
  Write(*m, {"<tool"});
  EXPECT_TRUE(Allows(*m, V().Id("_call>")));
  EXPECT_TRUE(Allows(*m, V().Id("_call>\n{\"")));
  EXPECT_FALSE(Allows(*m, V().Id("_call>X")));
  EXPECT_FALSE(m->Accept(V().Id("_call>X")).ok());
  EXPECT_FALSE(m->in_call());  // unchanged
  std::unique_ptr<TokenMask> copy = m->Clone();
  Write(*m, {"_call>\n{\""});
  EXPECT_TRUE(m->in_call());
  EXPECT_TRUE(Allows(*m, V().Id("n")));  // "name"
  // The clone kept the state before.
  auto& before = static_cast<ToolCallMask&>(*copy);
  EXPECT_FALSE(before.in_call());
  EXPECT_TRUE(before.Accept(V().Id("x")).ok());
  EXPECT_TRUE(Allows(before, V().Id("_call>X")));  // "<toolx": no trigger
}

TEST(ToolCallMaskTest, NoTriggerInsideReasoning) {
  ToolCallMaskOptions o;
  o.reasoning_open = "<think>";
  o.reasoning_close = "</think>";
  auto m = MakeMask(ToolCallSyntax::kHermes, ToolCallMode::kAuto, o);
  ASSERT_NE(m, nullptr);
  Write(*m, {"\n", "<think>", "hello", "<tool_call>"});
  EXPECT_FALSE(m->in_call());
  EXPECT_TRUE(Allows(*m, V().Id("_call>X")));
  Write(*m, {"</think>", "\n", "<tool_call>"});
  EXPECT_TRUE(m->in_call());

  // Starting inside reasoning (the prompt opened it).
  o.starts_in_reasoning = true;
  m = MakeMask(ToolCallSyntax::kHermes, ToolCallMode::kAuto, o);
  Write(*m, {"<tool_call>", "</think>"});
  EXPECT_FALSE(m->in_call());
  Write(*m, {"<tool_call>"});
  EXPECT_TRUE(m->in_call());

  // Reasoning only opens at the start.
  o.starts_in_reasoning = false;
  m = MakeMask(ToolCallSyntax::kHermes, ToolCallMode::kAuto, o);
  Write(*m, {"hello", "<think>", "<tool_call>"});
  EXPECT_TRUE(m->in_call());

  // A reasoning marker that is a control token counts as its text.
  o.reasoning_open = "[THINK]";
  o.reasoning_close = "[/THINK]";
  o.reasoning_tokens = {{kThink, "[THINK]"}};
  m = MakeMask(ToolCallSyntax::kHermes, ToolCallMode::kAuto, o);
  ASSERT_TRUE(m->Accept(kThink).ok());
  Write(*m, {"<tool_call>"});
  EXPECT_FALSE(m->in_call());
  WriteBytes(*m, "[/THINK]");
  Write(*m, {"<tool_call>"});
  EXPECT_TRUE(m->in_call());
}

TEST(ToolCallMaskTest, LlamaCallsOpenBareAtTheStartOrAfterThePythonTag) {
  auto m = MakeMask(ToolCallSyntax::kLlama3, ToolCallMode::kAuto);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(Allows(*m, V().Id("{\"")));
  Write(*m, {"\n", " ", "{\""});
  EXPECT_TRUE(m->in_call());
  WriteBytes(*m, "name\": \"f\", \"parameters\": {\"a\": 2}}");
  EXPECT_TRUE(Allows(*m, kEos));

  // After other text a brace is content; the python tag still opens one.
  m = MakeMask(ToolCallSyntax::kLlama3, ToolCallMode::kAuto);
  Write(*m, {"hello", " ", "{\""});
  EXPECT_FALSE(m->in_call());
  EXPECT_TRUE(Allows(*m, kPythonTag));
  ASSERT_TRUE(m->Accept(kPythonTag).ok());
  EXPECT_TRUE(m->in_call());
  EXPECT_TRUE(Allows(*m, V().Id("{\"")));
  EXPECT_FALSE(Allows(*m, V().Id("hello")));
}

TEST(ToolCallMaskTest, MistralOpensWithTheControlToken) {
  auto m = MakeMask(ToolCallSyntax::kMistral, ToolCallMode::kAuto);
  ASSERT_NE(m, nullptr);
  Write(*m, {"hello"});
  ASSERT_TRUE(m->Accept(kToolCalls).ok());
  EXPECT_TRUE(m->in_call());
  EXPECT_TRUE(Allows(*m, V().Id("[")));
  EXPECT_FALSE(Allows(*m, V().Id("hello")));
  // Spelled out in text, the marker opens a call too.
  m = MakeMask(ToolCallSyntax::kMistral, ToolCallMode::kAuto);
  WriteBytes(*m, "[TOOL_CALLS");
  EXPECT_FALSE(m->in_call());
  EXPECT_TRUE(Allows(*m, V().Id("]")));
  Write(*m, {"]"});
  EXPECT_TRUE(m->in_call());
}

}  // namespace
}  // namespace paceline::engine::grammar
