// Fast-forward (fast_forward.h): the bytes a JSON schema forces are the
// text JSON demands there, and their spelling is checked against a brute
// force over GPT-2's vocabulary.

#include "engine/sampling/grammar/fast_forward.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/grammar_mask.h"
#include "engine/sampling/grammar/json_schema.h"
#include "engine/sampling/grammar/mask_tables.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/gpt2_vocab.h"

namespace paceline::engine::grammar {
namespace {

std::shared_ptr<const TokenTrie> Gpt2Vocab() {
  return paceline::testing::Gpt2Trie();
}

std::shared_ptr<const CompiledGrammar> Schema(const std::string& text) {
  auto grammar = JsonSchemaToGrammar(text);
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  auto compiled = Compile(*grammar);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return *compiled;
}

// Two required keys, in either order (objects of up to 6 listed properties
// take them in any order).
constexpr char kPerson[] = R"({"type": "object",
  "properties": {"name": {"type": "string"},
                 "tags": {"type": "array", "items": {"enum": ["a", "b"]},
                          "maxItems": 1}},
  "required": ["name", "tags"], "additionalProperties": false})";

// What the matcher must read after `prefix`.
std::string ForcedAfter(const std::string& prefix) {
  Matcher m(Schema(kPerson));
  EXPECT_TRUE(m.AcceptBytes(prefix)) << prefix;
  return ForcedBytes(m);
}

TEST(ForcedBytesTest, TheTextJsonDemandsAndNothingWhereThereIsAChoice) {
  EXPECT_EQ(ForcedAfter(""), "{\"");  // then either key
  EXPECT_EQ(ForcedAfter("{\"n"), "ame\":");
  EXPECT_EQ(ForcedAfter("{\"name\":"), "");  // ' ' or '"'
  EXPECT_EQ(ForcedAfter("{\"name\": "), "\"");
  EXPECT_EQ(ForcedAfter("{\"name\":\"Bo"), "");  // more, or the end
  // The other required key, and nothing else, is left (one optional
  // space may follow ',').
  EXPECT_EQ(ForcedAfter("{\"name\":\"Bo\""), ",");
  EXPECT_EQ(ForcedAfter("{\"name\":\"Bo\","), "");
  EXPECT_EQ(ForcedAfter("{\"name\":\"Bo\", "), "\"tags\":");
  // An enum value, then maxItems 1 and the last key close everything.
  EXPECT_EQ(ForcedAfter("{\"name\":\"Bo\",\"tags\":[\"a"), "\"]}");
  // Complete: the grammar may end, so nothing is forced.
  EXPECT_EQ(ForcedAfter("{\"name\":\"Bo\",\"tags\":[]}"), "");
}

TEST(ForcedBytesTest, BoundedByMaxBytes) {
  Matcher m(Schema(kPerson));
  EXPECT_TRUE(m.AcceptBytes("{\"t"));
  EXPECT_EQ(ForcedBytes(m, 3), "ags");
}

// The brute force: does some token longer than `rest` start with it?
bool StartsLongerToken(const TokenTrie& vocab, const std::string& rest) {
  for (int32_t id = 0; id < vocab.vocab_size(); ++id) {
    const absl::string_view b = vocab.bytes(id);
    if (b.size() > rest.size() && b.substr(0, rest.size()) == rest) return true;
  }
  return false;
}

// The brute force: the length of the longest token `text` starts with.
size_t LongestTokenAt(const TokenTrie& vocab, const std::string& text) {
  size_t best = 0;
  for (int32_t id = 0; id < vocab.vocab_size(); ++id) {
    const absl::string_view b = vocab.bytes(id);
    if (b.size() > best && b.size() <= text.size() &&
        absl::StartsWith(text, b)) {
      best = b.size();
    }
  }
  return best;
}

TEST(SpellForcedTest, LongestTokensAndNoneThatCouldRunOnAgainstBruteForce) {
  const TokenTrie& vocab = *Gpt2Vocab();
  for (const std::string text :
       {"{\"name\":", ",\"age\":", "\"]}", "\"}]}}", "{\"type\": \"function\"",
        "</tool_call>", ",\"arguments\":{\"location\":\"", "true", "ab"}) {
    std::vector<int32_t> tokens;
    SpellForced(vocab, text, 64, &tokens);
    size_t pos = 0;
    for (int32_t id : tokens) {
      const std::string rest = text.substr(pos);
      EXPECT_EQ(vocab.bytes(id).size(), LongestTokenAt(vocab, rest))
          << text << " at " << pos;
      EXPECT_TRUE(absl::StartsWith(rest, vocab.bytes(id)));
      EXPECT_FALSE(StartsLongerToken(vocab, rest)) << text << " at " << pos;
      pos += vocab.bytes(id).size();
    }
    // Stopped at the end, or where the rest starts a longer token.
    if (pos < text.size()) {
      EXPECT_TRUE(StartsLongerToken(vocab, text.substr(pos)))
          << text << " stopped at " << pos;
    }
  }
  std::vector<int32_t> two;
  SpellForced(vocab, ",\"arguments\":{\"location\":\"", 2, &two);
  EXPECT_EQ(two.size(), 2u);
}

TEST(GrammarMaskForcedTest, ForcedTokensAreAcceptedAndSpellTheForcedBytes) {
  auto tables = std::make_shared<MaskTables>(Schema(kPerson), Gpt2Vocab());
  GrammarMask mask(tables);
  std::vector<int32_t> forced;
  mask.ForcedTokens(32, &forced);
  ASSERT_FALSE(forced.empty());
  std::string spelled;
  for (int32_t id : forced) {
    ASSERT_TRUE(mask.Accept(id).ok()) << id;
    absl::StrAppend(&spelled, tables->vocab().bytes(id));
  }
  EXPECT_EQ(std::string("{\"").substr(0, spelled.size()), spelled);
  // Byte by byte (GPT-2 has a token for every byte) to the end, where the
  // output may end and nothing is forced.
  const std::string whole = "{\"name\":\"Bo\",\"tags\":[]}";
  for (char c : whole.substr(spelled.size())) {
    int32_t id = 0;
    while (tables->vocab().bytes(id) != std::string(1, c)) ++id;
    ASSERT_TRUE(mask.Accept(id).ok()) << c;
  }
  ASSERT_TRUE(mask.matcher().CanFinish());
  forced.clear();
  mask.ForcedTokens(32, &forced);
  EXPECT_TRUE(forced.empty());
}

}  // namespace
}  // namespace paceline::engine::grammar
