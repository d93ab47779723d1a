// AddRegex (regex.h) against an outside oracle: Node's RegExp decides every
// expected match (regex_oracle.mjs, whole-text mode as ^(?:p)$ with the u
// flag, search mode as p). Each pattern is checked two ways: compiled and
// run by the Matcher, and by reading the grammar expression directly
// (IrMatcher below), so a disagreement points at the front end or at the
// compiler. Errors are checked by code and by the feature their message
// names; syntax errors also against Node's.

#include "engine/sampling/grammar/regex.h"

#include <stdio.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/matcher.h"
#include "gtest/gtest.h"
#include "tests/testing/build_paths.h"

namespace paceline::engine::grammar {
namespace {

constexpr char kNode[] = "/usr/bin/node";

// The grammar's meaning read straight off the expressions: the positions
// where a match of `id` starting at `pos` can end.
class IrMatcher {
 public:
  IrMatcher(const Grammar& g, absl::string_view text) : g_(g), text_(text) {}

  bool Matches(ExprId id) {
    for (size_t end : Ends(id, 0)) {
      if (end == text_.size()) return true;
    }
    return false;
  }

 private:
  using Positions = std::set<size_t>;

  Positions Step(ExprId id, const Positions& from) {
    Positions out;
    for (size_t p : from) {
      const Positions& ends = Ends(id, p);
      out.insert(ends.begin(), ends.end());
    }
    return out;
  }

  const Positions& Ends(ExprId id, size_t pos) {
    auto it = memo_.find({id, pos});
    if (it != memo_.end()) return it->second;
    const Expr& e = g_.expr(id);
    Positions out;
    switch (e.kind) {
      case ExprKind::kEmpty:
        out = {pos};
        break;
      case ExprKind::kNothing:
        break;
      case ExprKind::kBytes:
        if (pos < text_.size()) {
          const uint8_t b = static_cast<uint8_t>(text_[pos]);
          for (ByteRange r : e.ranges) {
            if (b >= r.lo && b <= r.hi) out = {pos + 1};
          }
        }
        break;
      case ExprKind::kSeq:
        out = {pos};
        for (ExprId c : e.children) out = Step(c, out);
        break;
      case ExprKind::kAlt:
        for (ExprId c : e.children) {
          const Positions& ends = Ends(c, pos);
          out.insert(ends.begin(), ends.end());
        }
        break;
      case ExprKind::kRepeat: {
        Positions at = {pos};  // after `count` copies
        int32_t count = 0;
        for (; count < e.min && !at.empty(); ++count) {
          at = Step(e.children[0], at);
        }
        out = at;
        if (e.max == kUnbounded) {
          for (Positions fresh = at; !fresh.empty();) {
            Positions next;
            for (size_t p : Step(e.children[0], fresh)) {
              if (out.insert(p).second) next.insert(p);
            }
            fresh = std::move(next);
          }
        } else {
          for (; count < e.max && !at.empty(); ++count) {
            at = Step(e.children[0], at);
            out.insert(at.begin(), at.end());
          }
        }
        break;
      }
      case ExprKind::kRef:
        out = Ends(g_.rule(e.rule).body, pos);
        break;
    }
    return memo_.emplace(std::make_pair(id, pos), std::move(out)).first->second;
  }

  const Grammar& g_;
  const absl::string_view text_;
  std::map<std::pair<ExprId, size_t>, Positions> memo_;
};

struct Case {
  std::string pattern;
  std::string text;
  bool search = false;
  std::string flags = "u";  // for the oracle: "" for the Annex B dialect
};

std::string Describe(const Case& c) {
  return absl::StrCat(c.search ? "search" : "whole", " /",
                      absl::CEscape(c.pattern), "/ on \"",
                      absl::CEscape(c.text), "\"");
}

// Node's answer per case: '1', '0' or 'E' (syntax error); empty when node
// could not be run.
std::string AskNode(const std::vector<Case>& cases) {
  static int calls = 0;
  const std::string path = absl::StrCat(::testing::TempDir(), "regex_oracle_",
                                        getpid(), "_", calls++, ".txt");
  {
    std::ofstream out(path, std::ios::binary);
    for (const Case& c : cases) {
      out << (c.search ? "search" : "whole") << '\t' << c.flags << '\t'
          << absl::BytesToHexString(c.pattern) << '\t'
          << absl::BytesToHexString(c.text) << '\n';
    }
  }
  const std::string command =
      absl::StrCat(kNode, " ",
                   paceline::testing::SourcePath(
                       "tests/engine/sampling/grammar/regex_oracle.mjs"),
                   " ", path);
  FILE* pipe = popen(command.c_str(), "r");
  std::string answers;
  if (pipe != nullptr) {
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
      answers.append(buffer, n);
    }
    if (pclose(pipe) != 0) answers.clear();
  }
  std::remove(path.c_str());
  std::string out;
  for (char c : answers) {
    if (c != '\n') out.push_back(c);
  }
  return out;
}

// One pattern in one mode, built and compiled once.
struct Built {
  Grammar g;
  absl::StatusOr<ExprId> expr;
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled;
};

std::unique_ptr<Built> Build(absl::string_view pattern, bool search) {
  auto b = std::make_unique<Built>();
  RegexOptions options;
  options.search = search;
  b->expr = AddRegex(&b->g, pattern, options);
  if (!b->expr.ok()) return b;
  const RuleId root = b->g.AddRule("root");
  b->g.SetRule(root, *b->expr);
  b->g.set_root(root);
  b->compiled = Compile(b->g);
  return b;
}

// Every case's answer from the Matcher and from IrMatcher equals Node's.
void ExpectAgreesWithNode(const std::vector<Case>& cases) {
  const std::string node = AskNode(cases);
  ASSERT_EQ(node.size(), cases.size()) << "node gave no answer";
  std::map<std::pair<std::string, bool>, std::unique_ptr<Built>> built;
  int failures = 0;
  for (size_t i = 0; i < cases.size() && failures < 20; ++i) {
    const Case& c = cases[i];
    ASSERT_NE(node[i], 'E') << "node rejects " << Describe(c);
    std::unique_ptr<Built>& b = built[{c.pattern, c.search}];
    if (b == nullptr) b = Build(c.pattern, c.search);
    ASSERT_TRUE(b->expr.ok()) << Describe(c) << ": " << b->expr.status();
    const bool expected = node[i] == '1';
    const bool by_ir = IrMatcher(b->g, c.text).Matches(*b->expr);
    // Compile refuses a root that matches nothing.
    bool by_matcher = false;
    if (b->compiled.ok()) {
      Matcher m(*b->compiled);
      by_matcher = m.AcceptBytes(c.text) && m.CanFinish();
    } else {
      EXPECT_FALSE(expected) << Describe(c) << ": " << b->compiled.status();
    }
    EXPECT_EQ(by_ir, expected) << "grammar expression: " << Describe(c);
    EXPECT_EQ(by_matcher, expected) << "matcher: " << Describe(c);
    if (by_ir != expected || by_matcher != expected) ++failures;
  }
}

class RegexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kNode, X_OK) != 0) GTEST_SKIP() << "no " << kNode;
  }

  // `pattern` against each text, in whole-text mode and in search mode.
  void Add(const std::string& pattern, const std::vector<std::string>& texts,
           const std::string& flags = "u") {
    for (bool search : {false, true}) {
      for (const std::string& text : texts) {
        cases_.push_back({pattern, text, search, flags});
      }
    }
  }

  void Check() {
    ExpectAgreesWithNode(cases_);
    cases_.clear();
  }

  std::vector<Case> cases_;
};

TEST_F(RegexTest, Literals) {
  Add("abc", {"", "abc", "ab", "abcd", "xabc", "xabcx", "ABC"});
  Add("", {"", "a", "\n"});
  Add("héllo", {"héllo", "hello", "hé", "xhéllox"});
  Add("日本語", {"日本語", "日本", "日本語!", "語"});
  Add("😀+", {"😀", "😀😀", "", "😁", "a😀b"});
  Add("a b", {"a b", "ab", "a  b"});
  Check();
}

TEST_F(RegexTest, Escapes) {
  Add("\\t\\n\\r\\f\\v", {"\t\n\r\f\v", "tnrfv", ""});
  Add("a\\0b", {std::string("a\0b", 3), "a0b", "ab"});
  Add("\\x41\\x7e\\xE9", {"A~é", "A~e", "a~é"});
  Add("\\u00e9\\u00E9", {"éé", "é", "ee"});
  Add("\\u{1F600}\\u{41}", {"😀A", "😀", "A"});
  Add("\\uD83D\\uDE00", {"😀", "😁", ""});
  Add("\\cJ\\cm", {"\n\r", "cJcm", "\n"});
  Add("a\\.b", {"a.b", "axb", "ab"});
  Add("\\^\\$\\\\\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\/",
      {"^$\\.*+?()[]{}|/", "^$", ""});
  Check();
}

// Escaped punctuation that only the Annex B dialect (no u flag) accepts
// stands for itself; the oracle runs without the flag on ASCII texts.
TEST_F(RegexTest, IdentityEscapesOfOtherPunctuation) {
  Add("\\-\\@\\#\\ \\!\\\"\\'\\%\\&\\,\\:\\;\\<\\=\\>\\_\\~\\`",
      {"-@# !\"'%&,:;<=>_~`", "-@#", ""}, "");
  Add("[a\\-z]+", {"a-z", "b", "-"}, "u");
  Add("a\\-b", {"a-b", "ab"}, "");
  Check();
}

TEST_F(RegexTest, ClassEscapes) {
  Add("\\d+", {"0123456789", "12a", "٣", "", "x1"});
  Add("\\D", {"a", "1", "é", "😀", "\n"});
  Add("\\w+", {"abc_XYZ09", "é", "a-b", "_"});
  Add("\\W", {"é", "-", "a", "_", " ", "😀"});
  std::vector<std::string> spaces = {
      "\t",     "\n",     "\v",     "\f",     "\r",     " ",
      "\u00A0", "\u1680", "\u2000", "\u2005", "\u200A", "\u2028",
      "\u2029", "\u202F", "\u205F", "\u3000", "\uFEFF", "\u200B",
      "\u0085", "\u180E", "a",      "\u2060", "\u200C"};
  Add("\\s", spaces);
  Add("\\S", spaces);
  Add("\\d\\s\\w", {"1 a", "1\ta", "a 1", "1\u3000_"});
  Check();
}

TEST_F(RegexTest, Dot) {
  Add(".", {"a", "\n", "\r", "\u2028", "\u2029", "é", "😀", "", "ab", "\t",
            "\u0085", std::string("\0", 1), "\x7f", "\uFFFF"});
  Add("a.c", {"abc", "a\nc", "aéc", "a😀c", "ac"});
  Add(".*", {"", "anything at all", "two\nlines"});
  Check();
}

TEST_F(RegexTest, Classes) {
  const std::vector<std::string> texts = {
      "a", "b", "z", "A", "-", "0", "5", " ",  "é",  "ü", "ñ",
      "😀", "😁", "😃", "]", "[", "^", ".", "\b", "\n", "",  "ab"};
  for (const char* p : {"[abc]",
                        "[a-z]",
                        "[^a-z]",
                        "[^]",
                        "[]",
                        "[a-]",
                        "[-a]",
                        "[a-z-0]",
                        "[\\d\\s]",
                        "[^\\d]",
                        "[\\w.-]+",
                        "[é-ü]",
                        "[😀-😂]",
                        "[^😀]",
                        "[\\u0041-\\u005A]",
                        "[\\b]",
                        "[\\-]",
                        "[\\]]",
                        "[[]",
                        "[.]",
                        "[\\^]",
                        "[^^]",
                        "[\\W\\d]",
                        "[^\\W]",
                        "[\\S]",
                        "[^\\s\\S]",
                        "[a-z--9]",
                        "[\\u{1F600}-\\u{1F601}]",
                        "[\\uD83D\\uDE00-\\uD83D\\uDE02]",
                        "[\\x00-\\x1f]",
                        "[^\\n]"}) {
    Add(p, texts);
  }
  Check();
}

TEST_F(RegexTest, GroupsAndAlternation) {
  const std::vector<std::string> texts = {
      "",   "a",  "b",  "c", "ab", "abab", "abc", "ababc",
      "cd", "xz", "yz", "z", "bc", "ac",   "aab", "bac"};
  for (const char* p : {"(ab)+", "(?:ab)+c", "(?<name>x|y)z", "((a)(b))",
                        "a|b|c", "ab|cd", "a|", "|a", "(a|b)*c", "(|a)b",
                        "(?:)", "()", "(a|ab)(c|bcd)?", "((?:a|b)c|ab)+"}) {
    Add(p, texts);
  }
  Check();
}

TEST_F(RegexTest, Quantifiers) {
  const std::vector<std::string> texts = {
      "",     "a",      "aa", "aaa", "aaaa", "aaaaa", "b",   "ab",
      "abab", "ababab", "bc", "abc", "éé",   "😀😀",    "😀😀😀", "aab"};
  for (const char* p :
       {"a*",          "a+",          "a?",        "a{3}",
        "a{2,}",       "a{2,4}",      "a{0}",      "a{0,0}",
        "a*?",         "a+?",         "a??",       "a{2,3}?",
        "a{2,}?",      "(ab){2}",     "(ab){1,}",  "é{2}",
        "😀{1,2}",      "(a|bc){2,3}", "(a*)*",     "(a?){3}",
        "(){2}",       "(a*)+b",      "a{0,1000}", "(?:a|ab){0,2}c?",
        "[ab]{2}[^a]?"}) {
    Add(p, texts);
  }
  Check();
}

// ^ and $ anywhere, in both modes: the lowering is exact, not a special
// case of a leading ^ and a trailing $.
TEST_F(RegexTest, Anchors) {
  const std::vector<std::string> texts = {
      "",    "a",    "b",   "c",   "ab", "ba",   "ac", "bc",
      "abc", "xa",   "ax",  "xb",  "bx", "aa",   "xy", "y",
      "x",   "a\nb", "\nb", "a\n", "bb", "abab", "xbc"};
  for (const char* p : {"^abc$",
                        "^a",
                        "a$",
                        "^a|b$",
                        "a^b",
                        "a$b",
                        "(^a|b)c",
                        "a(b$|c)",
                        "$^",
                        "^$",
                        "^",
                        "$",
                        "(^)*a",
                        "(a|^)b",
                        "(^a)+",
                        "(^a|b)+",
                        "(a$|b)+",
                        "(^|x)y",
                        "x(y|$)",
                        "(^a){2}",
                        "(^|a){2}b",
                        "(a|$){2}",
                        "(^a|b){2,3}",
                        "(b|a$)*",
                        "a(^b)?c?",
                        "(?:^|,)a(?:$|,)",
                        "^*?",
                        "(^$)?a",
                        "a(^|$)",
                        "(?:a|^){3}b",
                        "^(?:a|b)*$",
                        "(a^)*b",
                        "(x|^a|b$)(x|^a|b$)"}) {
    if (std::string(p) == "^*?") continue;  // a syntax error; see Errors
    Add(p, texts);
  }
  Check();
}

TEST_F(RegexTest, SearchAllowsAnyPrefixAndSuffix) {
  Add("b", {"a\nb\nc", "b", "abc", "ac", "😀b😀", ""});
  Add("^b", {"a\nb", "b\n", "bx"});
  Add("b$", {"a\nb", "b\n", "xb"});
  Add("x*", {"", "anything", "\n"});
  Add("\\d{3}", {"ab123cd", "12", "1 2 3"});
  Check();
}

// Random patterns over a small alphabet, every text up to three characters
// long, both modes: the anchors and quantifiers in all their combinations.
TEST_F(RegexTest, RandomPatternsAgreeWithNode) {
  std::mt19937 rng(20261207);
  auto pick = [&rng](int n) {
    return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng));
  };
  const std::vector<std::string> atoms = {"a",    "b",    "é",   ".",
                                          "[ab]", "[^a]", "\\s", "\\W"};
  const std::vector<std::string> quantifiers = {
      "*", "+", "?", "{0,2}", "{2}", "{1,}", "{1,3}", "{0,1}"};
  std::function<std::string(int)> gen = [&](int depth) -> std::string {
    const int choice = depth == 0 ? pick(3) : pick(7);
    switch (choice) {
      case 0:
      case 1:
        return atoms[pick(static_cast<int>(atoms.size()))];
      case 2:
        return pick(2) ? "^" : "$";
      case 3:
      case 4:
        return gen(depth - 1) + gen(depth - 1);
      case 5:
        return gen(depth - 1) + "|" + gen(depth - 1);
      default:
        return "(?:" + gen(depth - 1) + ")" +
               quantifiers[pick(static_cast<int>(quantifiers.size()))];
    }
  };
  std::vector<std::string> texts = {""};
  for (size_t begin = 0, len = 0; len < 3; ++len) {
    const size_t end = texts.size();
    for (size_t i = begin; i < end; ++i) {
      for (const char* c : {"a", "b", "é", "\n"}) texts.push_back(texts[i] + c);
    }
    begin = end;
  }
  for (int i = 0; i < 200; ++i) Add(gen(4), texts);
  Check();
}

// The emitter writes every class, the implicit search prefix and suffix
// included, and is given normalized ranges without surrogates.
TEST(RegexEmitterTest, EveryClassGoesThroughTheEmitter) {
  std::vector<std::vector<CodepointRange>> seen;
  RegexOptions options;
  options.search = true;
  // Each character written as <c>, to see that the emitter's form is used.
  options.emit = [&seen](Grammar* g, std::vector<CodepointRange> ranges) {
    seen.push_back(ranges);
    return g->Seq({g->Byte('<'), g->Codepoints(ranges), g->Byte('>')});
  };
  Grammar g;
  auto e = AddRegex(&g, "^[^a]b", options);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(seen.size(), 3u);
  const std::vector<std::pair<uint32_t, uint32_t>> not_a = {
      {0, 0x60}, {0x62, 0xD7FF}, {0xE000, 0x10FFFF}};
  const std::vector<std::pair<uint32_t, uint32_t>> any = {{0, 0xD7FF},
                                                          {0xE000, 0x10FFFF}};
  auto pairs = [](const std::vector<CodepointRange>& r) {
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (CodepointRange x : r) out.push_back({x.lo, x.hi});
    return out;
  };
  EXPECT_EQ(pairs(seen[0]), not_a);
  EXPECT_EQ(pairs(seen[1]),
            (std::vector<std::pair<uint32_t, uint32_t>>{{'b', 'b'}}));
  EXPECT_EQ(pairs(seen[2]), any);
  for (auto [text, expected] :
       std::vector<std::pair<std::string, bool>>{{"<x><b>", true},
                                                 {"<x><b><é>", true},
                                                 {"xb", false},
                                                 {"<a><b>", false},
                                                 {"<é><x><b>", false}}) {
    EXPECT_EQ(IrMatcher(g, text).Matches(*e), expected) << text;
  }
}

// Search mode trims the pattern's unanchored edges: \w{1,1000} there is
// "contains a \w", a small automaton (the oracle tests check the language).
TEST(RegexSearchTest, UnanchoredEdgesAreTrimmed) {
  for (const char* p : {"\\w{1,1000}", "[a-z]{3,900}x*", "^a{1,1000}"}) {
    auto b = Build(p, /*search=*/true);
    ASSERT_TRUE(b->expr.ok()) << b->expr.status();
    ASSERT_TRUE(b->compiled.ok()) << b->compiled.status();
    EXPECT_LT((*b->compiled)->num_states(), 100) << p;
  }
}

TEST(RegexLimitsTest, InvalidUtf8NeverMatches) {
  Grammar g;
  RegexOptions search;
  search.search = true;
  auto e = AddRegex(&g, ".*", search);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(IrMatcher(g, "ok").Matches(*e));
  EXPECT_FALSE(IrMatcher(g, "\xff").Matches(*e));
  EXPECT_FALSE(IrMatcher(g, "\xc3").Matches(*e));          // a cut é
  EXPECT_FALSE(IrMatcher(g, "\xed\xa0\x80").Matches(*e));  // a surrogate
}

// Each error: its code, a word of the feature or mistake it must name, and
// whether Node's RegExp (u flag) rejects the pattern too.
struct ErrorCase {
  std::string pattern;
  absl::StatusCode code;
  std::string names;
  bool node_rejects;
};

TEST_F(RegexTest, Errors) {
  using absl::StatusCode;
  const StatusCode kUnimpl = StatusCode::kUnimplemented;
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  const std::vector<ErrorCase> errors = {
      {"(a)\\1", kUnimpl, "backreference", false},
      {"(?<n>a)\\k<n>", kUnimpl, "backreference", false},
      {"a(?=b)", kUnimpl, "lookahead", false},
      {"a(?!b)", kUnimpl, "negative lookahead", false},
      {"(?<=a)b", kUnimpl, "lookbehind", false},
      {"(?<!a)b", kUnimpl, "negative lookbehind", false},
      {"\\bfoo", kUnimpl, "word boundary", false},
      {"\\Bfoo", kUnimpl, "word-boundary", false},
      {"(?i)abc", kUnimpl, "modifier", true},
      {"(?i:abc)", kUnimpl, "modifier", true},
      {"\\p{L}", kUnimpl, "property", false},
      {"\\P{L}", kUnimpl, "property", false},
      {"[\\p{L}]", kUnimpl, "property", false},
      {"(", kInvalid, "')'", true},
      {"a)", kInvalid, "unmatched ')'", true},
      {"[a", kInvalid, "']'", true},
      {"[z-a]", kInvalid, "out of order", true},
      {"a{2,1}", kInvalid, "out of order", true},
      {"*a", kInvalid, "nothing to repeat", true},
      {"a**", kInvalid, "nothing to repeat", true},
      {"a|?", kInvalid, "nothing to repeat", true},
      {"(+)", kInvalid, "nothing to repeat", true},
      {"{1}", kInvalid, "nothing to repeat", true},
      {"a{", kInvalid, "quantifier", true},
      {"a{1", kInvalid, "quantifier", true},
      {"a{1,2", kInvalid, "quantifier", true},
      {"a{,2}", kInvalid, "quantifier", true},
      {"a}", kInvalid, "lone '}'", true},
      {"a]", kInvalid, "lone ']'", true},
      {"a\\", kInvalid, "lone '\\'", true},
      {"\\x4", kInvalid, "hex", true},
      {"\\u12", kInvalid, "hex", true},
      {"\\u{110000}", kInvalid, "10FFFF", true},
      {"\\u{}", kInvalid, "hex", true},
      {"\\A", kInvalid, "unknown escape \\A", true},
      {"a\\z", kInvalid, "unknown escape \\z", true},
      {"\\Z", kInvalid, "unknown escape \\Z", true},
      {"\\01", kInvalid, "octal", true},
      {"[\\1]", kInvalid, "octal", true},
      {"\\c1", kInvalid, "\\c", true},
      {"[\\d-z]", kInvalid, "range", true},
      {"[\\B]", kInvalid, "\\B", true},
      {"(?P<n>a)", kInvalid, "Python", true},
      {"(?<>a)", kInvalid, "group name", true},
      {"(?<a", kInvalid, "group name", true},
      {"(?", kInvalid, "after '(?'", true},
      {"^*", kInvalid, "anchor", true},
      {"$+", kInvalid, "anchor", true},
      {"^*?", kInvalid, "anchor", true},
  };
  std::vector<Case> cases;
  for (const ErrorCase& c : errors) cases.push_back({c.pattern, ""});
  const std::string node = AskNode(cases);
  ASSERT_EQ(node.size(), errors.size());
  for (size_t i = 0; i < errors.size(); ++i) {
    const ErrorCase& c = errors[i];
    Grammar g;
    auto e = AddRegex(&g, c.pattern);
    EXPECT_EQ(e.status().code(), c.code) << c.pattern << ": " << e.status();
    EXPECT_TRUE(absl::StrContains(e.status().message(), c.names))
        << c.pattern << ": " << e.status();
    EXPECT_EQ(node[i] == 'E', c.node_rejects) << c.pattern;
  }
}

TEST(RegexLimitsTest, ErrorsGiveTheByteOffset) {
  Grammar g;
  EXPECT_TRUE(absl::StrContains(AddRegex(&g, "ab{2,1}").status().message(),
                                "at byte 2"));
  EXPECT_TRUE(absl::StrContains(AddRegex(&g, "é(?=x)").status().message(),
                                "at byte 2"));
  EXPECT_TRUE(absl::StrContains(AddRegex(&g, "a\xff").status().message(),
                                "at byte 1: invalid UTF-8"));
}

TEST(RegexLimitsTest, RepeatBound) {
  Grammar g;
  EXPECT_TRUE(AddRegex(&g, "a{1000}").ok());
  auto big = AddRegex(&g, "a{1001}");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(big.status().message(), "1001"));
  EXPECT_EQ(AddRegex(&g, "a{1,99999999999999999999}").status().code(),
            absl::StatusCode::kInvalidArgument);
  RegexOptions options;
  options.max_repeat = 2000;
  EXPECT_TRUE(AddRegex(&g, "a{2000}", options).ok());
}

TEST(RegexLimitsTest, NestedRepetitionsAreRefusedBeforeTheyBlowUp) {
  Grammar g;
  auto e = AddRegex(&g, "(?:(?:a{1000}){1000})");
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(e.status().message(), "expands"));
  EXPECT_LT(g.num_exprs(), 100);
  // The emitter's nodes count: `.` is dozens of nodes in UTF-8.
  EXPECT_EQ(AddRegex(&g, "(?:.{1000}){10}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(AddRegex(&g, "(?:(?:a{10}){10}){10}").ok());
  RegexOptions small;
  small.max_nodes = 50;
  EXPECT_EQ(AddRegex(&g, "a{100}", small).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RegexLimitsTest, DepthAndLength) {
  Grammar g;
  auto nested = [](int depth) {
    return std::string(depth, '(') + "a" + std::string(depth, ')');
  };
  EXPECT_TRUE(AddRegex(&g, nested(kMaxRegexDepth)).ok());
  auto deep = AddRegex(&g, nested(kMaxRegexDepth + 1));
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(deep.status().message(), "nested"));
  auto huge = AddRegex(&g, nested(100000));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(huge.status().message(), "limit"));
  EXPECT_TRUE(AddRegex(&g, std::string(kMaxRegexBytes, 'a')).ok());
  EXPECT_FALSE(AddRegex(&g, std::string(kMaxRegexBytes + 1, 'a')).ok());
}

// A pattern over many distinct characters shares one expression per class.
TEST(RegexLimitsTest, ManyAlternativesStayWithinTheNodeLimit) {
  std::string pattern;
  for (int i = 0; i < 3000; ++i) {
    absl::StrAppend(&pattern, i ? "|" : "", "a", i % 10, "b");
  }
  Grammar g;
  RegexOptions search;
  search.search = true;
  auto e = AddRegex(&g, pattern, search);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(IrMatcher(g, "xxa7byy").Matches(*e));
  EXPECT_FALSE(IrMatcher(g, "xxab").Matches(*e));
}

}  // namespace
}  // namespace paceline::engine::grammar
