// Compile (compile.h) and the byte-level Matcher (matcher.h) on grammars
// built by hand: each expectation follows from the grammar's meaning.

#include "engine/sampling/grammar/compile.h"

#include <memory>
#include <string>

#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/matcher.h"
#include "gtest/gtest.h"

namespace paceline::engine::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> MustCompile(const Grammar& g) {
  auto c = Compile(g);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

bool Matches(const std::shared_ptr<const CompiledGrammar>& c,
             const std::string& text) {
  Matcher m(c);
  return m.AcceptBytes(text) && m.CanFinish();
}

bool IsPrefix(const std::shared_ptr<const CompiledGrammar>& c,
              const std::string& text) {
  Matcher m(c);
  return m.AcceptBytes(text);
}

// root ::= "a" ("b" | "cd")* "e"
TEST(CompileTest, RegularRule) {
  Grammar g;
  RuleId root = g.AddRule("root");
  g.SetRule(root, g.Seq({g.Literal("a"),
                         g.Star(g.Alt({g.Literal("b"), g.Literal("cd")})),
                         g.Literal("e")}));
  g.set_root(root);
  auto c = MustCompile(g);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(Matches(c, "ae"));
  EXPECT_TRUE(Matches(c, "abcdbe"));
  EXPECT_FALSE(Matches(c, "ac"));
  EXPECT_FALSE(Matches(c, "abc"));
  EXPECT_TRUE(IsPrefix(c, "abc"));
  EXPECT_FALSE(IsPrefix(c, "ace"));
  EXPECT_FALSE(Matches(c, ""));
}

// Balanced brackets: root ::= item*, item ::= "(" root ")" | "x".
TEST(CompileTest, RecursionNestsToAnyDepth) {
  Grammar g;
  RuleId root = g.AddRule("root");
  RuleId item = g.AddRule("item");
  g.SetRule(root, g.Star(g.Ref(item)));
  g.SetRule(item, g.Alt({g.Seq({g.Literal("("), g.Ref(root), g.Literal(")")}),
                         g.Literal("x")}));
  g.set_root(root);
  auto c = MustCompile(g);
  ASSERT_NE(c, nullptr);
  std::string deep = std::string(500, '(') + "x" + std::string(500, ')');
  EXPECT_TRUE(Matches(c, deep));
  EXPECT_TRUE(Matches(c, "(x)(()x)x"));
  EXPECT_TRUE(Matches(c, ""));
  EXPECT_FALSE(Matches(c, "(x"));
  EXPECT_FALSE(Matches(c, "x)"));
  EXPECT_TRUE(IsPrefix(c, "((x"));
}

// Right recursion runs in constant depth: list ::= "a" list | "a".
TEST(CompileTest, RightRecursionDoesNotGrowTheStack) {
  Grammar g;
  RuleId list = g.AddRule("list");
  g.SetRule(list,
            g.Alt({g.Seq({g.Literal("a"), g.Ref(list)}), g.Literal("a")}));
  g.set_root(list);
  auto c = MustCompile(g);
  ASSERT_NE(c, nullptr);
  Matcher m(c);
  ASSERT_TRUE(m.AcceptBytes(std::string(10000, 'a')));
  EXPECT_TRUE(m.CanFinish());
  for (const Stack& s : m.stacks()) EXPECT_LE(s.size(), 2u);
}

// Ambiguity: root ::= x "b" | y "c", x ::= "a"+, y ::= "a"+ — both stacks
// live until the last byte decides.
TEST(CompileTest, AmbiguousPrefixesKeepEveryStack) {
  Grammar g;
  RuleId root = g.AddRule("root");
  RuleId x = g.AddRule("x");
  RuleId y = g.AddRule("y");
  g.SetRule(x, g.Plus(g.Literal("a")));
  g.SetRule(y, g.Plus(g.Literal("a")));
  g.SetRule(root, g.Alt({g.Seq({g.Ref(x), g.Literal("b")}),
                         g.Seq({g.Ref(y), g.Literal("c")})}));
  g.set_root(root);
  auto c = MustCompile(g);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(Matches(c, "aaab"));
  EXPECT_TRUE(Matches(c, "aac"));
  EXPECT_FALSE(Matches(c, "b"));
  Matcher m(c);
  ASSERT_TRUE(m.AcceptBytes("aa"));
  std::bitset<256> next = m.NextBytes();
  EXPECT_TRUE(next['a'] && next['b'] && next['c']);
  EXPECT_EQ(next.count(), 3u);
}

TEST(CompileTest, LeftRecursionIsRefused) {
  Grammar g;
  RuleId e = g.AddRule("expr");
  g.SetRule(e, g.Alt({g.Seq({g.Ref(e), g.Literal("+x")}), g.Literal("x")}));
  g.set_root(e);
  auto c = Compile(g);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("'expr'"), std::string::npos)
      << c.status();
}

TEST(CompileTest, RepeatingSomethingEmptyIsRefused) {
  Grammar g;
  RuleId root = g.AddRule("root");
  RuleId maybe = g.AddRule("maybe");
  g.SetRule(maybe, g.Optional(g.Literal("a")));
  g.SetRule(root, g.Star(g.Ref(maybe)));
  g.set_root(root);
  EXPECT_FALSE(Compile(g).ok());
}

// A rule that never completes is cut out: only "b" remains.
TEST(CompileTest, UnproductiveAlternativesAreTrimmed) {
  Grammar g;
  RuleId root = g.AddRule("root");
  RuleId forever = g.AddRule("forever");
  g.SetRule(forever, g.Seq({g.Literal("a"), g.Ref(forever)}));
  g.SetRule(root, g.Alt({g.Ref(forever), g.Literal("b")}));
  g.set_root(root);
  auto c = MustCompile(g);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(Matches(c, "b"));
  EXPECT_FALSE(IsPrefix(c, "a"));

  Grammar only;
  RuleId f = only.AddRule("forever");
  only.SetRule(f, only.Seq({only.Literal("a"), only.Ref(f)}));
  only.set_root(f);
  EXPECT_FALSE(Compile(only).ok());
}

TEST(CompileTest, BoundedRepeats) {
  Grammar g;
  RuleId root = g.AddRule("root");
  g.SetRule(root, g.Repeat(g.Bytes({{'0', '9'}}), 2, 4));
  g.set_root(root);
  auto c = MustCompile(g);
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(Matches(c, "1"));
  EXPECT_TRUE(Matches(c, "12"));
  EXPECT_TRUE(Matches(c, "1234"));
  EXPECT_FALSE(IsPrefix(c, "12345"));
}

// Code points become UTF-8: é (C3 A9) and 😀 (F0 9F 98 80) match, a lone
// continuation byte or a surrogate's encoding do not.
TEST(CompileTest, CodepointClassesMatchUtf8) {
  Grammar g;
  RuleId root = g.AddRule("root");
  g.SetRule(root, g.Star(g.NotCodepoints({{'"', '"'}})));
  g.set_root(root);
  auto c = MustCompile(g);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(Matches(c, "caf\xC3\xA9 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(Matches(c, "a\"b"));
  EXPECT_FALSE(IsPrefix(c, "\xA9"));
  EXPECT_FALSE(IsPrefix(c, "\xED\xA0\x80"));  // U+D800
  EXPECT_TRUE(IsPrefix(c, "\xF0\x9F"));       // inside a character
  EXPECT_FALSE(Matches(c, "\xF0\x9F"));
}

TEST(CompileTest, TooManyStatesIsResourceExhausted) {
  Grammar g;
  RuleId root = g.AddRule("root");
  ExprId digit = g.Bytes({{'0', '9'}});
  g.SetRule(root, g.Repeat(g.Repeat(g.Repeat(digit, 0, 100), 0, 100), 0, 100));
  g.set_root(root);
  CompileLimits limits;
  limits.max_nfa_states = 100000;
  auto c = Compile(g, limits);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace paceline::engine::grammar
