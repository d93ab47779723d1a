// ReasoningGate (reasoning_gate.h): a constraint that holds for the answer
// after the reasoning block, over a small vocabulary of every byte plus
// marker tokens (as control tokens, or spelled in bytes). At every step
// the mask must agree with Accept token by token (a clone per token), and
// the script checks where the constraint starts.

#include "engine/sampling/grammar/reasoning_gate.h"

#include <memory>
#include <string>
#include <vector>

#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/grammar_mask.h"
#include "engine/sampling/grammar/json_schema.h"
#include "engine/sampling/grammar/mask_tables.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/sampling/row_sampling_math.h"
#include "gtest/gtest.h"

namespace paceline::engine::grammar {
namespace {

// ids 0..255: the bytes; then the named tokens.
enum : int32_t {
  kOpen = 256,    // "<think>" as a control token
  kClose,         // "</think>" as a control token
  kEos,           // end of generation
  kBlankLine,     // "\n\n"
  kOpenStart,     // "<th"
  kOpenEnd,       // "ink>"
  kCloseText,     // "</think>"
  kCloseNewline,  // "</think>\n"
  kCloseBrace,    // "</think>{"
  kVocab,
};

std::shared_ptr<const TokenTrie> Vocab() {
  std::vector<std::string> bytes(kVocab);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  bytes[kBlankLine] = "\n\n";
  bytes[kOpenStart] = "<th";
  bytes[kOpenEnd] = "ink>";
  bytes[kCloseText] = "</think>";
  bytes[kCloseNewline] = "</think>\n";
  bytes[kCloseBrace] = "</think>{";
  return TokenTrie::Create(std::move(bytes), {kEos});
}

std::unique_ptr<TokenMask> Json() {
  auto grammar = JsonSchemaToGrammar(
      R"({"type": "object", "properties": {"a": {"type": "integer"}},
          "required": ["a"], "additionalProperties": false})");
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  auto compiled = Compile(*grammar);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return std::make_unique<GrammarMask>(
      std::make_shared<MaskTables>(*compiled, Vocab()));
}

ReasoningGate Gate(bool control_tokens, bool starts_in_reasoning) {
  ReasoningMarkers m;
  m.open = "<think>";
  m.close = "</think>";
  if (control_tokens) m.tokens = {{kOpen, "<think>"}, {kClose, "</think>"}};
  m.starts_in_reasoning = starts_in_reasoning;
  return ReasoningGate(Vocab(), std::move(m), Json());
}

// The mask against Accept on a clone, for every token.
void ExpectMaskAgreesWithAccept(ReasoningGate& gate, const std::string& at) {
  std::vector<uint32_t> words(MaskWords(kVocab));
  gate.Fill(absl::MakeSpan(words));
  for (int32_t id = 0; id < kVocab; ++id) {
    const bool accepted = gate.Clone()->Accept(id).ok();
    EXPECT_EQ(MaskAllows(words.data(), id), accepted)
        << "token " << id << " after " << at;
  }
}

bool Allows(ReasoningGate& gate, int32_t id) {
  std::vector<uint32_t> words(MaskWords(kVocab));
  gate.Fill(absl::MakeSpan(words));
  return MaskAllows(words.data(), id);
}

// Accepts `ids`, checking the mask at every step first.
void Feed(ReasoningGate& gate, const std::vector<int32_t>& ids) {
  std::string at = "start";
  for (int32_t id : ids) {
    ExpectMaskAgreesWithAccept(gate, at);
    ASSERT_TRUE(gate.Accept(id).ok()) << "token " << id << " after " << at;
    at += " " + std::to_string(id);
  }
  ExpectMaskAgreesWithAccept(gate, at);
}

std::vector<int32_t> Bytes(const std::string& text) {
  return std::vector<int32_t>(text.begin(), text.end());
}

std::vector<int32_t> Cat(std::vector<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(ReasoningGateTest, FreeReasoningThenTheConstrainedAnswer) {
  ReasoningGate gate = Gate(/*control_tokens=*/true, /*starts=*/true);
  EXPECT_EQ(gate.region(), ReasoningGate::Region::kReasoning);
  EXPECT_TRUE(Allows(gate, 'x'));  // anything while thinking
  EXPECT_TRUE(Allows(gate, '{'));
  EXPECT_FALSE(Allows(gate, kEos));  // the answer must still come
  Feed(gate, Cat({Bytes("Let me think. {not json"), {kClose, kBlankLine}}));
  EXPECT_EQ(gate.region(), ReasoningGate::Region::kGap);
  EXPECT_FALSE(Allows(gate, 'x'));  // the answer is JSON
  EXPECT_FALSE(Allows(gate, kEos));
  Feed(gate, Bytes("{\"a\":42}"));
  EXPECT_EQ(gate.region(), ReasoningGate::Region::kContent);
  EXPECT_TRUE(Allows(gate, kEos));
}

TEST(ReasoningGateTest, TheOutputMayOpenReasoningOrAnswerAtOnce) {
  ReasoningGate thinking = Gate(/*control_tokens=*/true, /*starts=*/false);
  EXPECT_EQ(thinking.region(), ReasoningGate::Region::kStart);
  EXPECT_TRUE(Allows(thinking, kOpen));
  EXPECT_TRUE(Allows(thinking, '{'));
  EXPECT_FALSE(Allows(thinking, 'x'));
  Feed(thinking,
       Cat({{'\n', kOpen}, Bytes("hmm"), {kClose}, Bytes("{\"a\":1}")}));

  ReasoningGate direct = Gate(/*control_tokens=*/true, /*starts=*/false);
  Feed(direct, Bytes("{\"a\":"));
  EXPECT_EQ(direct.region(), ReasoningGate::Region::kContent);
  EXPECT_FALSE(Allows(direct, kOpen));  // inside the answer now
}

TEST(ReasoningGateTest, MarkersSpelledInBytes) {
  ReasoningGate gate = Gate(/*control_tokens=*/false, /*starts=*/false);
  EXPECT_FALSE(Allows(gate, kOpen));  // not a marker here: no text
  Feed(gate, {kOpenStart});
  // Only the rest of the marker now.
  EXPECT_TRUE(Allows(gate, kOpenEnd));
  EXPECT_FALSE(Allows(gate, '{'));
  Feed(gate, Cat({{kOpenEnd}, Bytes("a </thin"), {'k', '>'}}));
  EXPECT_EQ(gate.region(), ReasoningGate::Region::kGap);
  Feed(gate, Bytes("{\"a\":7}"));
  EXPECT_TRUE(Allows(gate, kEos));
}

TEST(ReasoningGateTest, ACloseThatRunsOnIntoTheAnswerIsRefused) {
  ReasoningGate gate = Gate(/*control_tokens=*/false, /*starts=*/true);
  Feed(gate, Bytes("ok"));
  EXPECT_TRUE(Allows(gate, kCloseText));
  EXPECT_TRUE(Allows(gate, kCloseNewline));  // whitespace after: trimmed
  EXPECT_FALSE(Allows(gate, kCloseBrace));   // '{' would be the answer's
  ReasoningGate split = gate;
  Feed(split, {'<', '/', 't', 'h', 'i', 'n', 'k'});
  EXPECT_TRUE(Allows(split, '>'));
  Feed(gate, {kCloseNewline, '{'});
  EXPECT_EQ(gate.region(), ReasoningGate::Region::kContent);
}

TEST(ReasoningGateTest, WhitespaceBeforeTheAnswerIsBounded) {
  ReasoningGate gate = Gate(/*control_tokens=*/true, /*starts=*/true);
  Feed(gate, {kClose});
  // 16 bytes of blank lines, then only the answer.
  Feed(gate, std::vector<int32_t>(kMaxLeadingSpace / 2, kBlankLine));
  EXPECT_FALSE(Allows(gate, kBlankLine));
  EXPECT_FALSE(Allows(gate, ' '));
  EXPECT_TRUE(Allows(gate, '{'));
  ReasoningGate start = Gate(/*control_tokens=*/true, /*starts=*/false);
  Feed(start, std::vector<int32_t>(kMaxLeadingSpace, ' '));
  EXPECT_FALSE(Allows(start, ' '));
  EXPECT_TRUE(Allows(start, kOpen));
  EXPECT_TRUE(Allows(start, '{'));
}

TEST(ReasoningGateTest, FastForwardOnlyInTheAnswer) {
  ReasoningGate gate = Gate(/*control_tokens=*/true, /*starts=*/true);
  std::vector<int32_t> forced;
  gate.ForcedTokens(8, &forced);
  EXPECT_TRUE(forced.empty());
  Feed(gate, {kClose, '{'});
  gate.ForcedTokens(8, &forced);
  // '"a":' is what the schema demands next (no longer token starts with
  // its last byte, so all of it is forced), one byte token each.
  EXPECT_EQ(forced, Bytes("\"a\":"));
}

}  // namespace
}  // namespace paceline::engine::grammar
