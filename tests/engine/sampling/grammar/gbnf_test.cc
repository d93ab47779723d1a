// ParseGbnf (gbnf.h): llama.cpp's grammar format. Grammars in llama.cpp's
// style, compiled and matched byte by byte; what each must accept follows
// from the grammar's meaning. Then the IR shapes and every error path.

#include "engine/sampling/grammar/gbnf.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/matcher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace paceline::engine::grammar {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Parsed and compiled; null (with a failure recorded) if either step fails.
std::shared_ptr<const CompiledGrammar> Build(absl::string_view text,
                                             absl::string_view root = "root") {
  absl::StatusOr<Grammar> g = ParseGbnf(text, root);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  auto c = Compile(*g);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

bool Matches(const std::shared_ptr<const CompiledGrammar>& c,
             absl::string_view text) {
  Matcher m(c);
  return m.AcceptBytes(text) && m.CanFinish();
}

void ExpectMatches(absl::string_view grammar,
                   std::initializer_list<absl::string_view> good,
                   std::initializer_list<absl::string_view> bad) {
  auto c = Build(grammar);
  ASSERT_NE(c, nullptr);
  for (absl::string_view s : good) {
    EXPECT_TRUE(Matches(c, s)) << "'" << s << "'";
  }
  for (absl::string_view s : bad) {
    EXPECT_FALSE(Matches(c, s)) << "'" << s << "'";
  }
}

absl::Status ParseStatus(absl::string_view text) {
  return ParseGbnf(text).status();
}

void ExpectError(absl::string_view text, absl::string_view where,
                 absl::string_view what,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  absl::Status s = ParseStatus(text);
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), StartsWith(absl::StrCat(where, ": ")))
      << text;
  EXPECT_THAT(std::string(s.message()), HasSubstr(what)) << text;
}

// The bytes of a literal: one single-byte kBytes node, or a kSeq of them.
std::string LiteralOf(const Grammar& g, ExprId id) {
  const Expr& e = g.expr(id);
  auto one = [&](const Expr& b) -> std::string {
    if (b.kind != ExprKind::kBytes || b.ranges.size() != 1 ||
        b.ranges[0].lo != b.ranges[0].hi) {
      return "<not a literal>";
    }
    return std::string(1, static_cast<char>(b.ranges[0].lo));
  };
  if (e.kind != ExprKind::kSeq) return one(e);
  std::string out;
  for (ExprId c : e.children) out += one(g.expr(c));
  return out;
}

ExprId RootBody(const Grammar& g) { return g.rule(g.root()).body; }

// --- Grammars in llama.cpp's style ---------------------------------------

constexpr absl::string_view kJson =
    R"gbnf(# Any JSON value, whitespace allowed between tokens.
root   ::= ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"

object ::= "{" ws (
             member
             ("," ws member)*   # more members
           )? "}"
member ::= string ws ":" ws value ws

array  ::= "[" ws (
             value ws
             ("," ws value ws)*
           )? "]"

string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F] |
           "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
ws     ::= [ \t\n\r]*
)gbnf";

TEST(GbnfTest, Json) {
  ExpectMatches(
      kJson,
      {R"({"a": [1, 2.5, -3e10, true, null], "b": {"c": "x\"y\u00e9"}})",
       " [ ] ", "{}", "0", "-0.5E+3", "\"caf\xC3\xA9 \xF0\x9F\x98\x80\"",
       "[\n  {\"k\" : false}\n]\n"},
      {R"({"a" 1})", "[1,]", "01", R"("\x")", "tru", R"({"a":1,})", "\"open",
       "[1 2]", "\"tab\there\"", ".5", "1.", "-", "", "{} {}", R"("\u12")"});
}

constexpr absl::string_view kArithmetic = R"gbnf(
root   ::= (expr ws "=" ws num "\n")+
expr   ::= term (ws [-+] ws term)*
term   ::= factor (ws [*/] ws factor)*
factor ::= num | ident | "(" ws expr ws ")"
num    ::= [0-9]+
ident  ::= [a-z] [a-z0-9_]*
ws     ::= [ \t]*
)gbnf";

TEST(GbnfTest, Arithmetic) {
  ExpectMatches(kArithmetic,
                {"1+2=3\n", "x * (y - 2) = 10\n(1)=1\n", "x_1=2\n",
                 "a/b/c = 0\n", "( ( 7 ) )=7\n"},
                {"1+=3\n", "1+2=3", "", "(1+2=3\n", "1+2=a\n", "A=1\n",
                 "1 2=3\n", "1+2=3\n\n", "_x=1\n"});
}

TEST(GbnfTest, List) {
  ExpectMatches(
      "# a list of items\nroot ::= (\"- \" item)+\nitem ::= [^\\n]+ \"\\n\"",
      {"- milk\n- eggs\n", "- a\n", "- - nested dash\n"},
      {"", "- \n", "- milk", "* milk\n", "- milk\n\n", "-milk\n"});
}

constexpr absl::string_view kChess =
    R"gbnf(# Numbered moves, one or two per line.
root   ::= (turn "\n")+
turn   ::= [1-9] [0-9]? ". " move (" " move)?
move   ::= (pawn | piece | castle) [+#]?
pawn   ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBRQ])?
piece  ::= [NBRQK] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle ::= "O-O" ("-O")?
)gbnf";

TEST(GbnfTest, ChessLike) {
  ExpectMatches(kChess,
                {"1. e4 e5\n2. Nf3 Nc6\n", "12. O-O-O Qxd8#\n", "3. exd5\n",
                 "40. e8=Q+ Kf7\n", "5. Nbd2 O-O\n"},
                {"1. e9\n", "0. e4\n", "1.e4\n", "1. Pe4\n", "1. e4 e5 Nf3\n",
                 "100. e4\n", "1. O-O-O-O\n", "1. e4"});
}

constexpr absl::string_view kCLike = R"gbnf(
root      ::= (function ws)+
function  ::= type " " ident "(" params? ")" ws "{" ws (statement ws)* "}"
params    ::= type " " ident ("," ws type " " ident)*
type      ::= "int" | "void" | "char" "*"?

# A statement; several alternatives, one per line, joined by trailing bars.
statement ::=
    type " " ident ws "=" ws expr ";" |
    "return" (" " expr)? ";" |
    ident ws "=" ws expr ";" |
    "if" ws "(" expr ")" ws "{" ws (statement ws)* "}" |
    comment
comment   ::= "//" [^\n]* "\n" | "/*" ([^*] | "*"+ [^*/])* "*"+ "/"

expr      ::= operand (ws [-+*/<>] ws operand)*
operand   ::= ident | [0-9]+ | "(" ws expr ws ")" |
              ident "(" (expr ("," ws expr)*)? ")"
ident     ::= [a-zA-Z_] [a-zA-Z_0-9]*
ws        ::= [ \t\n]*
)gbnf";

TEST(GbnfTest, CLike) {
  ExpectMatches(kCLike,
                {"int main() {\n"
                 "  int x = 1;\n"
                 "  // comment\n"
                 "  if (x < 2) { x = x + 1; }\n"
                 "  return x;\n"
                 "}\n",
                 "void f(int a, char* b) { /* multi\n line * comment **/ "
                 "return; }",
                 "int f() {}", "int g() { return f(1, (2+3)); }"},
                {"int main() { x = ; }", "int main() { return x }",
                 "int main( { }", "float f() {}", "int main() { /* open }",
                 "int 1x() {}", "", "int f() {} }"});
}

constexpr absl::string_view kJapanese = R"gbnf(
# Kana and kanji words separated by spaces.
root     ::= word (" " word)*
word     ::= (hiragana | katakana | kanji)+ punct?
hiragana ::= [ぁ-ゖ]
katakana ::= [ァ-ヺー]
kanji    ::= [\u4E00-\u9FFF]
punct    ::= [、。！？]
)gbnf";

TEST(GbnfTest, UnicodeClasses) {
  ExpectMatches(kJapanese,
                {"こんにちは", "カタカナ ひらがな", "日本語。", "ラーメン！",
                 "東京 タワー？"},
                {"abc", "こんにちは ", "日本語。。", "", "\xF0\x9F\x98\x80",
                 "ﾊﾝｶｸ", "。"});
}

TEST(GbnfTest, NegatedUnicodeClass) {
  ExpectMatches("root ::= [^a-zé]+", {"XYZ\xF0\x9F\x98\x80", "É", "1 2", "\n"},
                {"aé", "é", "e", "", "Xe"});
}

TEST(GbnfTest, AstralClass) {
  ExpectMatches(R"(root ::= [\U0001F600-\U0001F64F]+)", {"😀🙏", "😀"},
                {"🚀", "", "a", "\xF0\x9F\x98"});
}

TEST(GbnfTest, AnyCharacterIsOneCodePoint) {
  ExpectMatches(R"(root ::= . "x" .)", {"axb", "éx😀", "xxx"},
                {"xx", "ax", "abxc", "é", "\xC3x\xA9"});
  ExpectMatches("root ::= .{3}", {"日本語", "abc", "a😀c"},
                {"日本", "abcd", ""});
}

// --- Literals, escapes and classes ----------------------------------------

TEST(GbnfTest, LiteralEscapesAreCodePoints) {
  absl::StatusOr<Grammar> g =
      ParseGbnf(R"(root ::= "\x41\u00e9\U0001F600\n\t\r\\\"\[\]")");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(LiteralOf(*g, RootBody(*g)),
            "A\xC3\xA9\xF0\x9F\x98\x80\n\t\r\\\"[]");
  // \xFF is the character U+00FF (two bytes), not the byte 0xFF.
  g = ParseGbnf(R"(root ::= "\xFF")");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(LiteralOf(*g, RootBody(*g)), "\xC3\xBF");
  // Raw UTF-8 is copied as is; a raw newline is part of the literal.
  g = ParseGbnf("root ::= \"caf\xC3\xA9\n\"");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(LiteralOf(*g, RootBody(*g)), "caf\xC3\xA9\n");
}

TEST(GbnfTest, ClassesRangesAndDashes) {
  ExpectMatches("root ::= [a-]", {"a", "-"}, {"b", ""});
  ExpectMatches("root ::= [-a]", {"a", "-"}, {"b"});
  ExpectMatches("root ::= [a-c-e]", {"a", "b", "c", "-", "e"}, {"d"});
  ExpectMatches(R"(root ::= [a\]\[\\"])", {"a", "]", "[", "\\", "\""}, {"b"});
  ExpectMatches(R"(root ::= [\x00-\x1F]+)", {std::string("\0\x1F\n", 3)},
                {" ", "a"});
  ExpectMatches(R"(root ::= [\u00e0-\u00ff])", {"à", "ÿ"}, {"a", "\xFF", "Ā"});
  ExpectMatches(R"(root ::= [^"\\]*)", {"", "abc", "日本"}, {"\"", "a\\b"});
}

// llama.cpp reads [z-a] as a range with no characters in it.
TEST(GbnfTest, ReversedRangeIsEmpty) {
  ExpectMatches(R"(root ::= [z-a] | "x")", {"x"}, {"m", "a", "z"});
  ExpectMatches(R"(root ::= [^z-a])", {"m", "é"}, {"", "ab"});
}

// --- Repetition -----------------------------------------------------------

TEST(GbnfTest, Repetitions) {
  ExpectMatches(R"(root ::= [ab]{3})", {"aaa", "bab"}, {"aa", "aaaa", ""});
  ExpectMatches(R"(root ::= "x"{2,4})", {"xx", "xxx", "xxxx"}, {"x", "xxxxx"});
  ExpectMatches(R"(root ::= "x"{2,})", {"xx", "xxxxxxxxxx"}, {"x", ""});
  ExpectMatches(R"(root ::= "x"{,2})", {"", "x", "xx"}, {"xxx"});
  ExpectMatches(R"(root ::= "x"{ 1 , 2 })", {"x", "xx"}, {"", "xxx"});
  ExpectMatches(R"(root ::= "ab"* "c"+ "d"?)", {"c", "ababccd", "abcc"},
                {"", "abd", "ac", "cdd"});
  ExpectMatches(R"(root ::= ("0x" [0-9A-F]{2} " "?){2,3})",
                {"0x00 0xFF", "0x01 0x02 0x03 "}, {"0x00", "0x0 0x1"});
  // Postfixes stack: ("ab"{2})? is "" or "abab".
  ExpectMatches(R"(root ::= "ab"{2}?)", {"", "abab"}, {"ab", "ababab"});
}

TEST(GbnfTest, RepetitionShapes) {
  absl::StatusOr<Grammar> g = ParseGbnf(R"(root ::= "a"{2,5})");
  ASSERT_TRUE(g.ok()) << g.status();
  const Expr& r = g->expr(RootBody(*g));
  ASSERT_EQ(r.kind, ExprKind::kRepeat);
  EXPECT_EQ(r.min, 2);
  EXPECT_EQ(r.max, 5);
  EXPECT_EQ(LiteralOf(*g, r.children[0]), "a");

  g = ParseGbnf(R"(root ::= "ab"{3,}?)");
  ASSERT_TRUE(g.ok()) << g.status();
  const Expr& outer = g->expr(RootBody(*g));
  ASSERT_EQ(outer.kind, ExprKind::kRepeat);
  EXPECT_EQ(outer.min, 0);
  EXPECT_EQ(outer.max, 1);
  const Expr& inner = g->expr(outer.children[0]);
  ASSERT_EQ(inner.kind, ExprKind::kRepeat);
  EXPECT_EQ(inner.min, 3);
  EXPECT_EQ(inner.max, kUnbounded);
  EXPECT_EQ(LiteralOf(*g, inner.children[0]), "ab");

  g = ParseGbnf(R"(root ::= "a"{10000} "b"{0,10000})");
  EXPECT_TRUE(g.ok()) << g.status();
}

// --- Layout: newlines, comments, order --------------------------------------

constexpr absl::string_view kMultiLine =
    R"gbnf(root ::= greeting ", " name   # a comment after a rule

greeting ::= "hello" |
             "hi" |   # a comment after a trailing bar
             # a comment line inside the rule
             "hey"
name ::= (
  "world"
  | "there"     # a leading bar is fine inside parentheses
)
# a comment at the end, with no newline after it)gbnf";

TEST(GbnfTest, MultiLineRulesAndComments) {
  ExpectMatches(kMultiLine, {"hello, world", "hey, there", "hi, world"},
                {"hello world", "yo, world", "hello, "});
}

TEST(GbnfTest, CrLfAndCrLineEnds) {
  ExpectMatches("root ::= a b\r\na ::= \"x\" |\r\n  \"y\"\r\nb ::= \"z\"\r\n",
                {"xz", "yz"}, {"x", "xy"});
  ExpectMatches("root ::= a\ra ::= \"x\"\r", {"x"}, {""});
}

TEST(GbnfTest, EmptyAlternativesAndBodies) {
  ExpectMatches("root ::= \"a\" opt \"b\"\nopt ::= | \"-\"", {"ab", "a-b"},
                {"a--b", "a"});
  ExpectMatches("root ::= \"a\" e\ne ::=", {"a"}, {"", "aa"});
  ExpectMatches("root ::= \"a\" () \"\" \"b\"", {"ab"}, {"a"});
}

TEST(GbnfTest, ForwardReferencesAndNames) {
  ExpectMatches(
      "root ::= my_rule 9lives x-y Mixed\n"
      "my_rule ::= \"x\"\n9lives ::= \"9\"\nx-y ::= \"-\"\nMixed ::= \"M\"",
      {"x9-M"}, {"x9-"});
}

// llama.cpp keeps the last definition of a rule defined twice.
TEST(GbnfTest, RedefinitionKeepsTheLast) {
  ExpectMatches("root ::= item\nitem ::= \"a\"\nitem ::= \"b\"", {"b"}, {"a"});
}

TEST(GbnfTest, CustomRoot) {
  auto c = Build("foobar ::= \"x\"\nroot ::= \"y\"", "foobar");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(Matches(c, "x"));
  EXPECT_FALSE(Matches(c, "y"));
  absl::StatusOr<Grammar> g = ParseGbnf("start ::= \"s\"", "start");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->rule(g->root()).name, "start");
}

TEST(GbnfTest, RulesAreNamedInOrderOfAppearance) {
  absl::StatusOr<Grammar> g =
      ParseGbnf("root ::= b a\na ::= \"a\"\nb ::= \"b\"");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->num_rules(), 3);
  EXPECT_EQ(g->rule(0).name, "root");
  EXPECT_EQ(g->rule(1).name, "b");
  EXPECT_EQ(g->rule(2).name, "a");
  EXPECT_EQ(g->root(), 0);
  EXPECT_TRUE(g->Validate().ok());
}

// The parser leaves left recursion to Compile, which refuses it.
TEST(GbnfTest, LeftRecursionParsesAndCompileRefusesIt) {
  absl::StatusOr<Grammar> g = ParseGbnf("root ::= root \"a\" | \"a\"");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(Compile(*g).ok());
}

TEST(GbnfTest, LimitsAtTheEdgeParse) {
  std::string deep = "root ::= " + std::string(kGbnfMaxNesting, '(') + "\"a\"" +
                     std::string(kGbnfMaxNesting, ')');
  EXPECT_TRUE(ParseGbnf(deep).ok()) << ParseStatus(deep);
  std::string big = "root ::= \"a\" #";
  big.resize(kGbnfMaxTextBytes, '-');
  EXPECT_TRUE(ParseGbnf(big).ok()) << ParseStatus(big);
}

// --- Errors ---------------------------------------------------------------

TEST(GbnfErrorTest, MissingRoot) {
  ExpectError("foo ::= \"x\"\n", "2:1", "no rule named 'root'");
  ExpectError("", "1:1", "no rule named 'root'");
  ExpectError("# only a comment", "1:17", "no rule named 'root'");
  absl::Status s = ParseGbnf("root ::= \"x\"", "nonexistent").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'nonexistent'"));
}

TEST(GbnfErrorTest, UndefinedRuleNamesItsFirstUse) {
  ExpectError(
      "root ::= expr\nexpr ::= term\nterm ::= numero\n"
      "number ::= [0-9]+",
      "3:10", "undefined rule 'numero'");
  ExpectError("root ::= b a\na ::= c\n", "1:10", "undefined rule 'b'");
  // Also in a rule the root never reaches, as llama.cpp does.
  ExpectError("root ::= \"x\"\nunused ::= missing\n", "2:12",
              "undefined rule 'missing'");
}

TEST(GbnfErrorTest, RuleHeader) {
  ExpectError("root = \"a\"", "1:6",
              "expected '::=' after the rule name 'root'");
  ExpectError("root\n::= \"a\"", "1:5", "found end of line");
  ExpectError("::= \"a\"", "1:1", "expected a rule name, found ':'");
  ExpectError("root ::= \"a\"\nfoo: \"b\"", "2:4", "expected '::='");
}

// A newline ends a rule outside parentheses unless it follows '|' or "::=".
TEST(GbnfErrorTest, NewlinesEndRules) {
  ExpectError("root ::= \"a\"\n  | \"b\"\n", "2:3",
              "expected a rule name, found '|' (a rule continues");
  ExpectError("root ::= \"a\"\n  \"b\"\n", "2:3",
              "expected a rule name, found '\"'");
  ExpectError("root ::= \"a\" |\nfoo ::= \"b\"", "2:5",
              "found '::=': the rule before it is not finished");
  ExpectError("root ::= e\ne ::=\nx ::= \"b\"", "3:3", "found '::='");
  ExpectError("root ::= (\"a\"\nfoo ::= \"b\")", "2:5", "found '::='");
}

TEST(GbnfErrorTest, Groups) {
  ExpectError("root ::= (\"a\"\n", "2:1",
              "expected ')' to close the '(' at 1:10, found end of input");
  ExpectError("root ::= (\"a\" ]", "1:15",
              "expected ')' to close the '(' at 1:10, found ']'");
  ExpectError("root ::= \"a\")", "1:13", "found ')' with no '(' to close");
  ExpectError("root ::= \"a\" @", "1:14",
              "expected a symbol, '|' or the end of the line, found '@'");
  ExpectError("root ::= 'a'", "1:10", "found '''");
}

TEST(GbnfErrorTest, Literals) {
  ExpectError("root ::= \"abc", "1:10", "unterminated string literal");
  ExpectError("root ::= \"a\\q\"", "1:12", "unknown escape '\\q'");
  ExpectError("root ::= [\\-]", "1:11", "unknown escape '\\-'");
  ExpectError("root ::= \"\\", "1:11", "unterminated escape");
  ExpectError("root ::= \"\\\n\"", "1:11",
              "unknown escape: '\\' followed by end of line");
  ExpectError("root ::= \"\\x4\"", "1:11", "expected 2 hex digits after '\\x'");
  ExpectError("root ::= \"\\u12G4\"", "1:11", "expected 4 hex digits");
  ExpectError("root ::= \"\\U0001F60\"", "1:11", "expected 8 hex digits");
  ExpectError("root ::= \"\\uD800\"", "1:11", "U+D800 is not a Unicode");
  ExpectError("root ::= \"\\U00110000\"", "1:11", "U+110000 is not a Unicode");
}

TEST(GbnfErrorTest, InvalidUtf8) {
  ExpectError("root ::= \"\xFF\"", "1:11", "invalid UTF-8 (byte 0xFF)");
  ExpectError("root ::= \"\xC0\x80\"", "1:11", "invalid UTF-8");  // overlong
  ExpectError("root ::= \"\xED\xA0\x80\"", "1:11", "invalid UTF-8");  // D800
  ExpectError("root ::= \"\xE2\x82\"", "1:11", "invalid UTF-8");  // cut short
  ExpectError("root ::= [a-\x80]", "1:13", "invalid UTF-8");
}

TEST(GbnfErrorTest, Classes) {
  ExpectError("root ::= [abc", "1:10", "unterminated character class");
  ExpectError("root ::= [a-", "1:10", "unterminated character class");
  ExpectError("root ::= []", "1:10", "empty character class '[]'");
  ExpectError("root ::= [^]", "1:10", "empty character class '[^]'");
}

TEST(GbnfErrorTest, PostfixNeedsAnItem) {
  ExpectError("root ::= *\"a\"", "1:10", "'*' must follow a symbol");
  ExpectError("root ::= \"a\" | +\"b\"", "1:16", "'+' must follow a symbol");
  ExpectError("root ::= ( ?\"a\")", "1:12", "'?' must follow a symbol");
  ExpectError("root ::= {2}", "1:10", "'{' must follow a symbol");
}

TEST(GbnfErrorTest, Braces) {
  ExpectError("root ::= \"a\"{}", "1:14", "expected a number after '{'");
  ExpectError("root ::= \"a\"{x}", "1:14", "expected a number after '{'");
  ExpectError("root ::= \"a\"{,}", "1:15", "expected a number in '{,n}'");
  ExpectError("root ::= \"a\"{2", "1:15", "expected ',' or '}'");
  ExpectError("root ::= \"a\"{2,3", "1:17", "expected '}'");
  ExpectError("root ::= \"a\"{5,2}", "1:13", "minimum is greater than");
  ExpectError("root ::= \"a\"{10001}", "1:14", "over the limit of 10000");
  ExpectError("root ::= \"a\"{0,10001}", "1:16", "over the limit of 10000");
  ExpectError("root ::= \"a\"{99999999999999999999999}", "1:14",
              "over the limit");
}

TEST(GbnfErrorTest, TokenReferencesAreUnimplemented) {
  const auto kUnimplemented = absl::StatusCode::kUnimplemented;
  ExpectError("root ::= <think> \"x\"", "1:10", "token references",
              kUnimplemented);
  ExpectError("root ::= \"a\" <[123]>", "1:14", "token references",
              kUnimplemented);
  ExpectError("root ::= ( !<[5]> )*", "1:12", "token references",
              kUnimplemented);
}

TEST(GbnfErrorTest, Limits) {
  std::string deep = "root ::= " + std::string(kGbnfMaxNesting + 1, '(') +
                     "\"a\"" + std::string(kGbnfMaxNesting + 1, ')');
  ExpectError(deep, absl::StrCat("1:", 10 + kGbnfMaxNesting),
              "nested more than 200 deep");

  std::string big = "root ::= \"a\" #";
  big.resize(kGbnfMaxTextBytes + 1, '-');
  ExpectError(big, "1:1", "over the limit of 1048576");

  // 600,000 bytes of literal: under the text limit, over the node limit.
  std::string wide = "root ::= \"" + std::string(600000, 'a') + "\"";
  ExpectError(wide, "1:600012", "too large");
  // Many small items add up too.
  std::string many = "root ::= ";
  for (int i = 0; i < 200000; ++i) many += "\"ab\" ";
  EXPECT_THAT(std::string(ParseStatus(many).message()), HasSubstr("too large"));
}

TEST(GbnfErrorTest, ColumnsCountCharacters) {
  ExpectError("root ::= \"é\" @", "1:14", "found '@'");
  ExpectError("root ::= a\r\na ::= \"x\" @\r\n", "2:11", "found '@'");
}

}  // namespace
}  // namespace paceline::engine::grammar
