// `paceline generate` with a constraint flag on stories260K: every output
// belongs to the constraint's language (a JSON Schema checked by hand, a
// choice list, a regex), greedy and sampled; the flags' usage errors; a
// schema the compiler refuses.

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

using ::testing::AnyOf;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kPrompts[] = {"Once upon a time", "The cat",
                                    "Lily and Tom"};

class ConstrainedGenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
  }

  // `paceline generate` of kPrompts together with `args`, at temperature 1
  // (the model samples freely inside the language); each continuation.
  std::vector<std::string> Generate(std::vector<std::string> args) {
    args.insert(args.begin(), {"generate", "--model", kStories260KPath,
                               "--max-tokens", "200", "--threads", "2"});
    for (const char* p : kPrompts) args.insert(args.end(), {"--prompt", p});
    const CommandResult r = RunPaceline(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, Not(HasSubstr("cut at"))) << r.out;
    // "--- [i] PROMPT\nTEXT\n" per prompt.
    std::vector<std::string> texts;
    const std::string& out = r.out;
    for (size_t at = out.find("--- ["); at != std::string::npos;
         at = out.find("\n--- [", at)) {
      const size_t begin = out.find('\n', at + 1) + 1;
      size_t end = out.find("\n--- [", begin);
      if (end == std::string::npos) end = out.size() - 1;
      texts.push_back(out.substr(begin, end - begin));
      at = end;
    }
    EXPECT_EQ(texts.size(), std::size(kPrompts)) << r.out;
    return texts;
  }
};

TEST_F(ConstrainedGenerateTest, JsonSchemaOutputsAreValid) {
  const std::string schema = WriteFile("person.json", kPersonSchema);
  for (const char* seed : {"1", "2", "3"}) {
    SCOPED_TRACE(seed);
    for (const std::string& text : Generate(
             {"--json-schema", schema, "--temperature", "1", "--seed", seed})) {
      EXPECT_EQ(PersonViolation(text), "") << text;
    }
  }
}

// Fast-forward (on by default) forces tokens and saves engine steps; off,
// none are forced; the outputs are valid either way.
TEST_F(ConstrainedGenerateTest, FastForwardIsCountedAndCanBeTurnedOff) {
  const std::string schema = WriteFile("person.json", kPersonSchema);
  std::vector<std::string> args = {"generate",
                                   "--model",
                                   kStories260KPath,
                                   "--max-tokens",
                                   "200",
                                   "--threads",
                                   "2",
                                   "--json-schema",
                                   schema,
                                   "--temperature",
                                   "1",
                                   "--seed",
                                   "4",
                                   "--prompt",
                                   "The cat"};
  const std::regex line(
      "fast-forward: (\\d+) tokens forced( \\(off\\))?; "
      "(\\d+) engine steps");
  int steps[2] = {0, 0};
  for (int off = 0; off < 2; ++off) {
    if (off == 1) args.push_back("--no-fast-forward");
    const CommandResult r = RunPaceline(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m, line)) << r.err;
    if (off == 1) {
      EXPECT_EQ(m[1], "0");
      EXPECT_TRUE(m[2].matched);
    } else {
      EXPECT_GT(std::stoi(m[1]), 0);
    }
    steps[off] = std::stoi(m[3]);
    const std::string text = r.out.substr(0, r.out.find('\n'));
    EXPECT_EQ(PersonViolation(text), "") << text;
  }
  EXPECT_LT(steps[0], steps[1]);
}

TEST_F(ConstrainedGenerateTest, FlexibleWhitespaceOutputsAreValid) {
  const std::string schema = WriteFile("person.json", kPersonSchema);
  for (const std::string& text :
       Generate({"--json-schema", schema, "--flexible-whitespace",
                 "--temperature", "1", "--seed", "4"})) {
    EXPECT_EQ(PersonViolation(text), "") << text;
  }
}

TEST_F(ConstrainedGenerateTest, GreedyJsonSchemaOutputIsValid) {
  const CommandResult r =
      RunPaceline({"generate", "--model", kStories260KPath, "--prompt",
                   kOnceUponATime, "--max-tokens", "200", "--json-schema",
                   WriteFile("person.json", kPersonSchema)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(PersonViolation(r.out.substr(0, r.out.size() - 1)), "") << r.out;
}

TEST_F(ConstrainedGenerateTest, ChoiceOutputsAreOneOfTheChoices) {
  for (const char* seed : {"1", "2"}) {
    for (const std::string& text :
         Generate({"--choice", "red,green,blue\\, dark", "--temperature", "1",
                   "--seed", seed})) {
      EXPECT_THAT(text, AnyOf(Eq("red"), Eq("green"), Eq("blue, dark")));
    }
  }
}

TEST_F(ConstrainedGenerateTest, RegexOutputsMatch) {
  const std::regex re("[a-c]{2,4}-[0-9]{1,3}");
  for (const std::string& text :
       Generate({"--regex", "[a-c]{2,4}-[0-9]{1,3}", "--temperature", "1"})) {
    EXPECT_TRUE(std::regex_match(text, re)) << text;
  }
}

// The compiler's refusal, after the model is loaded: a failure naming the
// flag and the keyword; nothing generated.
TEST_F(ConstrainedGenerateTest, RefusedKeywordFails) {
  const CommandResult r = RunPaceline(
      {"generate", "--model", kStories260KPath, "--prompt", kOnceUponATime,
       "--json-schema",
       WriteFile("unique.json", R"({"type": "array", "uniqueItems": true})")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, StartsWith("paceline generate: error: --json-schema: "));
  EXPECT_THAT(r.err, HasSubstr("uniqueItems"));
}

TEST(ConstrainedGenerateUsageTest, ConstraintFlagErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--regex", "a", "--choice", "a,b"},
       "--regex and --choice cannot be combined"},
      {{"--choice", "a", "--flexible-whitespace"},
       "--flexible-whitespace needs --json-schema"},
      {{"--grammar", TempPath("absent.gbnf")},
       "--grammar: cannot read grammar"},
  };
  for (const auto& [extra, message] : cases) {
    SCOPED_TRACE(message);
    std::vector<std::string> args = {"generate", "--model", "dummy:stories15m",
                                     "--prompt", "hi"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = RunPaceline(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_THAT(r.err, StartsWith("paceline generate: " + message));
    EXPECT_THAT(r.err, HasSubstr("usage: paceline generate"));
  }
}

}  // namespace
}  // namespace paceline::testing
