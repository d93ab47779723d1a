// MaskTables (mask_tables.h) and GrammarMask against brute force: at every
// step of random walks through real grammars, over GPT-2's 50,257-token
// vocabulary, the mask must allow exactly the tokens whose bytes a fresh
// Matcher accepts (and end of generation exactly where it can finish).

#include "engine/sampling/grammar/mask_tables.h"

#include <cctype>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/counted_strings.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/grammar_mask.h"
#include "engine/sampling/grammar/json_schema.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/grammar/regex.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/sampling/row_sampling_math.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/gpt2_vocab.h"

namespace paceline::engine::grammar {
namespace {

std::shared_ptr<const TokenTrie> Gpt2Vocab() {
  return paceline::testing::Gpt2Trie();
}

// Any JSON value, written as a grammar by hand (RFC 8259), whitespace
// limited to one optional space after ',' and ':'.
Grammar JsonGrammar() {
  Grammar g;
  RuleId value = g.AddRule("value");
  RuleId object = g.AddRule("object");
  RuleId array = g.AddRule("array");
  RuleId string = g.AddRule("string");
  RuleId number = g.AddRule("number");
  ExprId sp = g.Optional(g.Literal(" "));
  ExprId hex = g.Bytes({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
  ExprId escape = g.Seq(
      {g.Literal("\\"), g.Alt({g.Bytes({{'"', '"'},
                                        {'\\', '\\'},
                                        {'/', '/'},
                                        {'b', 'b'},
                                        {'f', 'f'},
                                        {'n', 'n'},
                                        {'r', 'r'},
                                        {'t', 't'}}),
                               g.Seq({g.Literal("u"), g.Repeat(hex, 4, 4)})})});
  ExprId plain = g.NotCodepoints({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
  g.SetRule(string, g.Seq({g.Literal("\""), g.Star(g.Alt({plain, escape})),
                           g.Literal("\"")}));
  ExprId digits = g.Plus(g.Bytes({{'0', '9'}}));
  g.SetRule(
      number,
      g.Seq({g.Optional(g.Literal("-")),
             g.Alt({g.Literal("0"), g.Seq({g.Bytes({{'1', '9'}}),
                                           g.Star(g.Bytes({{'0', '9'}}))})}),
             g.Optional(g.Seq({g.Literal("."), digits})),
             g.Optional(g.Seq({g.Bytes({{'e', 'e'}, {'E', 'E'}}),
                               g.Optional(g.Bytes({{'+', '+'}, {'-', '-'}})),
                               digits}))}));
  ExprId member = g.Seq({g.Ref(string), g.Literal(":"), sp, g.Ref(value)});
  g.SetRule(object,
            g.Seq({g.Literal("{"),
                   g.Optional(g.Seq(
                       {member, g.Star(g.Seq({g.Literal(","), sp, member}))})),
                   g.Literal("}")}));
  g.SetRule(
      array,
      g.Seq({g.Literal("["),
             g.Optional(g.Seq({g.Ref(value), g.Star(g.Seq({g.Literal(","), sp,
                                                           g.Ref(value)}))})),
             g.Literal("]")}));
  g.SetRule(value,
            g.Alt({g.Ref(object), g.Ref(array), g.Ref(string), g.Ref(number),
                   g.Literal("true"), g.Literal("false"), g.Literal("null")}));
  g.set_root(value);
  return g;
}

// An ambiguous grammar whose two readings diverge late:
// root ::= x "!" | y "?", x ::= [a-z ]+, y ::= [a-m ]+ "z"*.
Grammar AmbiguousGrammar() {
  Grammar g;
  RuleId root = g.AddRule("root");
  RuleId x = g.AddRule("x");
  RuleId y = g.AddRule("y");
  g.SetRule(x, g.Plus(g.Bytes({{'a', 'z'}, {' ', ' '}})));
  g.SetRule(y, g.Seq({g.Plus(g.Bytes({{'a', 'm'}, {' ', ' '}})),
                      g.Star(g.Literal("z"))}));
  g.SetRule(root, g.Alt({g.Seq({g.Ref(x), g.Literal("!")}),
                         g.Seq({g.Ref(y), g.Literal("?")})}));
  g.set_root(root);
  return g;
}

// The brute-force statement of the mask.
std::vector<uint32_t> BruteForce(const Matcher& m, const TokenTrie& vocab) {
  std::vector<uint32_t> bits(MaskWords(vocab.vocab_size()), 0);
  for (int32_t id = 0; id < vocab.vocab_size(); ++id) {
    if (vocab.bytes(id).empty()) continue;
    Matcher copy = m;
    if (copy.AcceptBytes(vocab.bytes(id))) bits[id >> 5] |= 1u << (id & 31);
  }
  if (m.CanFinish()) {
    for (int32_t id : vocab.eog_ids()) bits[id >> 5] |= 1u << (id & 31);
  }
  return bits;
}

void RandomWalks(const Grammar& g, int walks, int steps, uint32_t seed) {
  auto compiled = Compile(g);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto vocab = Gpt2Vocab();
  auto tables = std::make_shared<MaskTables>(*compiled, vocab);
  std::mt19937 rng(seed);
  for (int w = 0; w < walks; ++w) {
    GrammarMask mask(tables);
    for (int step = 0; step < steps; ++step) {
      std::vector<uint32_t> bits(MaskWords(vocab->vocab_size()));
      mask.Fill(absl::MakeSpan(bits));
      ASSERT_EQ(bits, BruteForce(mask.matcher(), *vocab))
          << "walk " << w << " step " << step;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->vocab_size(); ++id) {
        if (MaskAllows(bits.data(), id)) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      // Half the picks among tokens with punctuation, so walks leave
      // strings and numbers and nest.
      std::vector<int32_t> punct;
      for (int32_t id : allowed) {
        for (char c : vocab->bytes(id)) {
          if (std::ispunct(static_cast<unsigned char>(c))) {
            punct.push_back(id);
            break;
          }
        }
      }
      const std::vector<int32_t>& from =
          !punct.empty() && rng() % 2 == 0 ? punct : allowed;
      int32_t pick = from[rng() % from.size()];
      ASSERT_TRUE(mask.Accept(pick).ok());
      if (mask.ended()) break;
    }
  }
}

TEST(MaskTablesTest, JsonMatchesBruteForce) {
  RandomWalks(JsonGrammar(), 6, 40, 1);
}

TEST(MaskTablesTest, AmbiguousGrammarMatchesBruteForce) {
  RandomWalks(AmbiguousGrammar(), 4, 20, 2);
}

// A schema whose objects take other keys (a key outside a list: the
// entries of the list's trie share their walks below a first byte).
TEST(MaskTablesTest, JsonSchemaWithOtherKeysMatchesBruteForce) {
  auto g = JsonSchemaToGrammar(absl::string_view(R"({
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6},
                   "names": {"type": "array", "items": {"type": "integer"}},
                   "nap": {"enum": [1, "one", null]}},
    "required": ["name"],
    "additionalProperties": {"type": "boolean"}})"));
  ASSERT_TRUE(g.ok()) << g.status();
  RandomWalks(*g, 6, 30, 3);
}

// Two states read the same letters into different states (one ends with
// '.', the other with '!'): walks below a first byte are shared only
// between states that reach the same state with it.
TEST(MaskTablesTest, SharedWalksBelowAByteKeepTheirState) {
  Grammar g;
  RuleId root = g.AddRule("root");
  ExprId letters = g.Star(g.Bytes({{'a', 'z'}}));
  g.SetRule(root, g.Alt({g.Seq({g.Literal("x"), letters, g.Literal(".")}),
                         g.Seq({g.Literal("y"), letters, g.Literal("!")})}));
  g.set_root(root);
  auto compiled = Compile(g);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto vocab = Gpt2Vocab();
  auto tables = std::make_shared<MaskTables>(*compiled, vocab);
  std::vector<uint32_t> bits(MaskWords(vocab->vocab_size()));
  for (const char* start : {"x", "y", "x"}) {
    GrammarMask mask(tables);
    int32_t id = -1;
    for (int32_t t = 0; t < vocab->vocab_size(); ++t) {
      if (vocab->bytes(t) == start) id = t;
    }
    ASSERT_GE(id, 0);
    ASSERT_TRUE(mask.Accept(id).ok());
    mask.Fill(absl::MakeSpan(bits));
    EXPECT_EQ(bits, BruteForce(mask.matcher(), *vocab)) << start;
  }
}

// The mask after every byte prefix of each of `texts` (from `from` bytes
// on, up to the first the grammar refuses), filled by `tables`, against
// brute force. Returns how many texts were read whole.
int CheckPrefixes(const std::shared_ptr<MaskTables>& tables,
                  const std::vector<std::string>& texts, size_t from) {
  const TokenTrie& vocab = tables->vocab();
  int whole = 0;
  for (const std::string& text : texts) {
    for (size_t n = from; n <= text.size(); ++n) {
      Matcher m(tables->grammar_shared());
      if (!m.AcceptBytes(text.substr(0, n))) break;
      whole += n == text.size();
      std::vector<uint32_t> bits(MaskWords(vocab.vocab_size()), 0);
      tables->Fill(m.stacks(), absl::MakeSpan(bits));
      if (m.CanFinish()) {
        for (int32_t id : vocab.eog_ids()) bits[id >> 5] |= 1u << (id & 31);
      }
      EXPECT_EQ(bits, BruteForce(m, vocab))
          << "after `" << text.substr(0, n) << "`";
      if (::testing::Test::HasFailure()) return whole;
    }
  }
  return whole;
}

std::shared_ptr<const CompiledGrammar> CompileSchema(absl::string_view schema) {
  auto g = JsonSchemaToGrammar(schema);
  EXPECT_TRUE(g.ok()) << g.status();
  auto compiled = Compile(*g);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return *compiled;
}

// Keys outside a property list: the entries of the list's trie nodes are
// derived from one another's (mask_tables.h), also across grammars
// sharing their entries. Keys with common prefixes, multi-byte characters
// and escapes; every byte prefix, inside characters too.
TEST(MaskTablesTest, KeysOutsideAListMatchBruteForce) {
  auto shared = std::make_shared<SharedEntries>();
  auto first = std::make_shared<MaskTables>(CompileSchema(R"({
    "type": "object",
    "properties": {"a": {"type": "integer"}, "ab": {"type": "integer"},
                   "abc": {"type": "integer"}, "n\u00e4m\u00e9": {},
                   "\u65e5\u672c": {}, "q\"t": {}, "tab\t": {}},
    "additionalProperties": {"type": "integer"}})"),
                                            Gpt2Vocab(), shared);
  EXPECT_EQ(
      CheckPrefixes(
          first,
          {"{\"ab\":1,\"abd\":2,\"ac", "{\"n\xC3\xA4m\xC3\xA9\":1,\"n\xC3\xA4x",
           "{\"\xE6\x97\xA5\xE6\x9C\xAC\":1,\"\xE6\x97\xA5\xE6\x9D",
           "{\"q\\\"t\":1,\"q\\\"u", "{\"tab\\t\":1,\"tab\\n"},
          2),
      5);
  // Another list, over the same shared entries: its entries derive from
  // bases the first grammar made.
  auto second = std::make_shared<MaskTables>(CompileSchema(R"({
    "type": "object",
    "properties": {"abd": {"type": "integer"}, "b": {"type": "string"}},
    "additionalProperties": true})"),
                                             Gpt2Vocab(), shared);
  EXPECT_EQ(CheckPrefixes(second, {"{\"abd\":1,\"abe\":2,\"b\":\"x\",\"ba"}, 2),
            1);
  // Without shared entries: the grammar's own bases.
  auto own = std::make_shared<MaskTables>(CompileSchema(R"({
    "type": "object", "properties": {"id": {}, "idx": {}}})"),
                                          Gpt2Vocab());
  EXPECT_EQ(CheckPrefixes(own, {"{\"idy\":1,\"id\":2,\"i"}, 2), 1);
}

// A derived entry walks again the first bytes whose futures differ from
// its base's, whole subtrees (small ones included): after a first
// character the search below may no longer start with "ab".
TEST(MaskTablesTest, DerivedEntriesWalkTheBytesThatDiffer) {
  Grammar g;
  RegexOptions options;
  options.search = true;
  auto body = AddRegex(&g, "(^ab|cd)e+$|x", options);
  ASSERT_TRUE(body.ok()) << body.status();
  const RuleId root = g.AddRule("root");
  g.SetRule(root, *body);
  g.set_root(root);
  auto compiled = Compile(g);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto tables = std::make_shared<MaskTables>(*compiled, Gpt2Vocab());
  EXPECT_EQ(CheckPrefixes(tables, {"zab", "abx", "cde", "xcdee"}, 0), 4);
}

// Counted strings: each position's entry comes from the vocabulary read
// once as string content (counted_strings.h). Bounds near and far from
// each end, multi-byte characters, escapes, tokens going on after the
// closing quote; every byte prefix.
TEST(MaskTablesTest, CountedStringsMatchBruteForce) {
  auto shared = std::make_shared<SharedEntries>();
  // The bounds, and how many of the texts below they take whole.
  const std::vector<std::pair<const char*, int>> cases = {
      {R"("minLength": 2, "maxLength": 5)", 2},
      {R"("maxLength": 1)", 1},
      {R"("minLength": 3, "maxLength": 40)", 3},
      {R"("minLength": 4)", 2},
      {R"("minLength": 1, "maxLength": 1)", 1}};
  for (const auto& [bounds, whole] : cases) {
    auto tables = std::make_shared<MaskTables>(
        CompileSchema(absl::StrCat(R"({"type": "object", "properties": {
          "s": {"type": "string", )",
                                   bounds, R"(}}, "required": ["s"]})")),
        Gpt2Vocab(), shared);
    EXPECT_EQ(CheckPrefixes(
                  tables,
                  {"{\"s\":\"a\"}",
                   "{\"s\":\"\xC3\xA9"
                   "b\\n\\u001f\"}",
                   "{\"s\":\"\xE6\x97\xA5x\\\"\"}", "{\"s\":\"abcdefghijklmno"},
                  5),
              whole)
        << bounds;
  }
  // Without shared entries, and a string at the root.
  auto own = std::make_shared<MaskTables>(
      CompileSchema(R"({"type": "string", "minLength": 2, "maxLength": 3})"),
      Gpt2Vocab());
  EXPECT_EQ(CheckPrefixes(own, {"\"\xF0\x9F\x98\x80\\t\"", "\"abc\""}, 0), 2);
}

// Recognize proves a rule a counted string only when it is one.
TEST(CountedStringsTest, RecognizesCountedStringsOnly) {
  auto vocab = Gpt2Vocab();
  CountedStrings strings(*vocab);
  struct Case {
    const char* schema;
    bool counted;
    int64_t min;
    int64_t max;
  };
  for (const Case& c : {
           Case{R"({"type": "string", "minLength": 2, "maxLength": 7})", true,
                2, 7},
           Case{R"({"type": "string", "minLength": 3})", true, 3,
                CountedRule::kUnbounded},
           Case{R"({"type": "string"})", true, 0, CountedRule::kUnbounded},
           Case{R"({"type": "string", "pattern": "^[a-z]{2,5}$"})", false, 0,
                0},
           Case{R"({"enum": ["ab", "abc"]})", false, 0, 0},
       }) {
    auto compiled = CompileSchema(c.schema);
    std::shared_ptr<const CountedRule> found;
    for (RuleId r = 0; r < compiled->num_rules(); ++r) {
      if (compiled->rule(r).fingerprint == 0) continue;
      if (auto rule = strings.Recognize(compiled->rule(r))) found = rule;
    }
    ASSERT_EQ(found != nullptr, c.counted) << c.schema;
    if (found == nullptr) continue;
    EXPECT_EQ(found->min, c.min) << c.schema;
    EXPECT_EQ(found->max, c.max) << c.schema;
  }
}

TEST(MaskTablesTest, RefusedTokensFailAccept) {
  auto compiled = Compile(JsonGrammar());
  ASSERT_TRUE(compiled.ok());
  auto vocab = Gpt2Vocab();
  GrammarMask mask(std::make_shared<MaskTables>(*compiled, vocab));
  const int32_t eog = vocab->eog_ids()[0];
  EXPECT_FALSE(mask.Accept(eog).ok());  // nothing yet: cannot end
  // Find the token "[" and "]".
  int32_t open = -1;
  int32_t close = -1;
  for (int32_t id = 0; id < vocab->vocab_size(); ++id) {
    if (vocab->bytes(id) == "[") open = id;
    if (vocab->bytes(id) == "]") close = id;
  }
  ASSERT_GE(open, 0);
  ASSERT_GE(close, 0);
  EXPECT_FALSE(mask.Accept(close).ok());
  ASSERT_TRUE(mask.Accept(open).ok());
  ASSERT_TRUE(mask.Accept(close).ok());
  EXPECT_TRUE(mask.Accept(eog).ok());
  EXPECT_TRUE(mask.ended());
  std::vector<uint32_t> bits(MaskWords(vocab->vocab_size()), 1);
  mask.Fill(absl::MakeSpan(bits));
  for (uint32_t w : bits) EXPECT_EQ(w, 0u);
}

}  // namespace
}  // namespace paceline::engine::grammar
