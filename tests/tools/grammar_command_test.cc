// `paceline grammar`: a constraint compiled and reported, texts checked
// against it (verdicts and refusal offsets derived by hand from the
// constraint's meaning), refusals and usage errors, and the first token
// mask over stories260K's vocabulary.

#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"
#include "tests/testing/paceline_cli.h"
#include "tests/testing/person_schema.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

CommandResult Grammar(std::vector<std::string> args) {
  args.insert(args.begin(), "grammar");
  return RunPaceline(args);
}

TEST(GrammarCommandTest, HelpExitsZero) {
  const CommandResult r = Grammar({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("usage: paceline grammar"));
  EXPECT_THAT(r.out, HasSubstr("--choice A,B,C"));
  EXPECT_THAT(r.err, IsEmpty());
}

TEST(GrammarCommandTest, SchemaSummary) {
  const CommandResult r =
      Grammar({"--json-schema", WriteFile("person.json", kPersonSchema)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("kind: json_schema (compact whitespace)\n"));
  EXPECT_THAT(r.out, ContainsRegex("\ngrammar: [0-9]+ rules, [0-9]+ "
                                   "expressions\n"));
  EXPECT_THAT(r.out, ContainsRegex("\nautomata: [0-9]+ states, [0-9.]+ "));
  EXPECT_THAT(r.out, ContainsRegex("\ncompile: [0-9]+\\.[0-9]{3} ms "
                                   "\\(grammar [0-9.]+ ms, automata "
                                   "[0-9.]+ ms\\)\n"));
  EXPECT_THAT(r.err, IsEmpty());
}

// The schema wants exactly name (<= 8 characters), age (0..120) and pet
// (cat or dog). A pretty-printed instance is checked in its compact form.
TEST(GrammarCommandTest, SchemaChecks) {
  const std::string schema = WriteFile("person.json", kPersonSchema);
  const std::string ok =
      WriteFile("ok.json",
                "{\n  \"pet\": \"dog\",\n  \"name\": \"Ann\",\n  \"age\": "
                "42\n}\n");
  // {"name":"Ann","age":130,"pet":"cat"}: "13" could still be 13, "130" is
  // past 120; the '0' is byte 22.
  const std::string old =
      WriteFile("old.json", R"({"name": "Ann", "age": 130, "pet": "cat"})");
  // {"name":"Ann","age":7}: the object may not close without pet, byte 21.
  const std::string no_pet =
      WriteFile("no_pet.json", R"({"name": "Ann", "age": 7})");
  const std::string not_json = WriteFile("bad.json", "{\"name\": ");

  CommandResult r = Grammar({"--json-schema", schema, "--check", ok});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("check " + ok + ": accepted\n"));

  r = Grammar({"--json-schema", schema, "--check", ok, "--check", old,
               "--check", no_pet, "--check", not_json});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.out, HasSubstr("check " + ok + ": accepted\n"));
  EXPECT_THAT(r.out, HasSubstr("check " + old +
                               ": refused at byte 22 of 36 (of the compact "
                               "JSON): \"{\\\"name\\\":\\\"Ann\\\",\\\"age\\\":"
                               "13\" | \"0,\\\"pet\\\":\\\"cat\\\"}\"\n"));
  EXPECT_THAT(r.out, HasSubstr("check " + no_pet +
                               ": refused at byte 21 of 22 (of the compact "
                               "JSON): \"{\\\"name\\\":\\\"Ann\\\",\\\"age\\\":"
                               "7\" | \"}\"\n"));
  EXPECT_THAT(r.out, HasSubstr("check " + not_json +
                               ": refused: not JSON: "
                               "parse error"));
}

TEST(GrammarCommandTest, RefusedKeywordIsNamed) {
  const std::string schema =
      WriteFile("unique.json", R"({"type": "array", "uniqueItems": true})");
  const CommandResult r = Grammar({"--json-schema", schema});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, StartsWith("paceline grammar: error: --json-schema: "));
  EXPECT_THAT(r.err, HasSubstr("uniqueItems"));
}

// A sum of one to three digit numbers in parentheses.
TEST(GrammarCommandTest, GbnfChecksAndPrint) {
  const std::string gbnf = WriteFile(
      "sum.gbnf", "root ::= \"(\" [0-9]{1,3} (\"+\" [0-9]{1,3})* \")\"\n");
  const std::string ok = WriteFile("ok.txt", "(1+22)\n");
  const std::string long_number = WriteFile("long.txt", "(1+2222)");
  const CommandResult r = Grammar(
      {"--grammar", gbnf, "--print", "--check", ok, "--check", long_number});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.out, StartsWith("kind: grammar\n"));
  EXPECT_THAT(r.out, ContainsRegex("\nroot ::= [^\n]+\n"));
  EXPECT_THAT(r.out, HasSubstr("check " + ok + ": accepted\n"));
  EXPECT_THAT(r.out, HasSubstr("check " + long_number +
                               ": refused at byte 6 of 8: \"(1+222\" | "
                               "\"2)\"\n"));
}

TEST(GrammarCommandTest, RegexChecks) {
  const std::string ok = WriteFile("ok.txt", "ab-12\n");
  const std::string short_text = WriteFile("short.txt", "abc");
  const std::string bad_letter = WriteFile("d.txt", "ad-1");
  const CommandResult r =
      Grammar({"--regex", "[a-c]{2,4}-[0-9]{1,3}", "--check", ok, "--check",
               short_text, "--check", bad_letter});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.out, StartsWith("kind: regex\n"));
  EXPECT_THAT(r.out, HasSubstr("check " + ok + ": accepted\n"));
  EXPECT_THAT(r.out, HasSubstr("check " + short_text +
                               ": refused at byte 3 of 3 (the text ends too "
                               "soon): \"abc\" | \"\"\n"));
  EXPECT_THAT(r.out, HasSubstr("check " + bad_letter +
                               ": refused at byte 1 of 4: \"a\" | \"d-1\"\n"));
}

TEST(GrammarCommandTest, ChoiceSplitsAtUnescapedCommas) {
  const std::string comma = WriteFile("comma.txt", "a,b");
  const std::string no = WriteFile("no.txt", "no\n");
  const std::string a = WriteFile("a.txt", "a");
  const CommandResult r =
      Grammar({"--choice", "yes,a\\,b", "--choice", "no", "--check", comma,
               "--check", no, "--check", a});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.out, HasSubstr("check " + comma + ": accepted\n"));
  EXPECT_THAT(r.out, HasSubstr("check " + no + ": accepted\n"));
  // "a" alone is only the start of "a,b".
  EXPECT_THAT(r.out, HasSubstr("check " + a +
                               ": refused at byte 1 of 1 (the text ends too "
                               "soon)"));
}

TEST(GrammarCommandTest, UsageErrors) {
  const std::string schema = WriteFile("person.json", kPersonSchema);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "give one of --json-schema, --grammar, --regex and --choice"},
      {{"--json-schema", schema, "--regex", "a"},
       "--json-schema and --regex cannot be combined"},
      {{"--grammar", schema, "--choice", "a"},
       "--grammar and --choice cannot be combined"},
      {{"--regex", "a", "--flexible-whitespace"},
       "--flexible-whitespace needs --json-schema"},
      {{"--json-schema", TempPath("absent.json")},
       "--json-schema: cannot read schema"},
      {{"--regex", "a", "--check", TempPath("absent.txt")},
       "--check: cannot read"},
      {{"--choice", "a,,b"}, "--choice: value 2 of 'a,,b' is empty"},
      {{"--choice", "a\\b"}, "--choice: a backslash at byte 1"},
      {{"--regex", "a", "extra"}, "unexpected argument 'extra'"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(message);
    const CommandResult r = Grammar(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_THAT(r.err, StartsWith("paceline grammar: " + message));
    EXPECT_THAT(r.err, HasSubstr("usage: paceline grammar"));
    EXPECT_THAT(r.out, IsEmpty());
  }
}

TEST(GrammarCommandTest, FlexibleWhitespaceIsSaid) {
  const CommandResult r =
      Grammar({"--json-schema", WriteFile("person.json", kPersonSchema),
               "--flexible-whitespace"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("kind: json_schema (flexible whitespace)\n"));
}

// Over stories260K's 512 tokens: a JSON object starts with '{', so some
// tokens (at least the byte token of '{') and not all are allowed.
TEST(GrammarCommandTest, ModelReportsTheFirstMask) {
  if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
  const CommandResult r =
      Grammar({"--json-schema", WriteFile("person.json", kPersonSchema),
               "--model", kStories260KPath});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\nvocabulary: 512 tokens, trie of [0-9]+ "
                                   "nodes in [0-9.]+ ms\n"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex("\nfirst mask: ([0-9]+) of 512 tokens allowed in [0-9.]+ "
                 "ms\n")))
      << r.out;
  EXPECT_GT(std::stoi(m[1]), 0);
  EXPECT_LT(std::stoi(m[1]), 512);
}

TEST(GrammarCommandTest, MissingModelFails) {
  const CommandResult r =
      Grammar({"--regex", "a", "--model", TempPath("absent.gguf")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("paceline grammar: error: "));
}

}  // namespace
}  // namespace paceline::testing
