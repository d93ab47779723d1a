// The MaskBench harness (maskbench.h) over a hand-made schema front end and
// GPT-2's vocabulary: what it counts as passing, a compile error, a
// validation error, an invalidation error and a timeout; sampling; the
// report. (maskbench_sample_test runs it on the real front end and Llama 3.)

#include "tests/testing/maskbench.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/gpt2_vocab.h"

namespace paceline::testing {
namespace {

using engine::grammar::Grammar;
using OrderedJson = nlohmann::ordered_json;

// The front end under test: {"type": "integer"} (no sign, no leading
// zeros), {"enum": [...]} (the values as written compactly), and an error
// naming the first keyword of anything else.
absl::StatusOr<Grammar> HandMade(const OrderedJson& schema) {
  Grammar g;
  const engine::grammar::RuleId root = g.AddRule("root");
  if (schema.value("type", "") == "integer") {
    g.SetRule(root,
              g.Alt({g.Literal("0"), g.Seq({g.Bytes({{'1', '9'}}),
                                            g.Star(g.Bytes({{'0', '9'}}))})}));
  } else if (schema.contains("enum")) {
    std::vector<engine::grammar::ExprId> values;
    for (const OrderedJson& v : *schema.find("enum")) {
      values.push_back(g.Literal(v.dump()));
    }
    g.SetRule(root, g.Alt(std::move(values)));
  } else {
    return absl::UnimplementedError(
        absl::StrCat("'", schema.begin().key(), "' at # is not supported"));
  }
  g.set_root(root);
  return g;
}

MaskBenchOptions Options() {
  MaskBenchOptions options;
  options.to_grammar = HandMade;
  return options;
}

OrderedJson Entry(absl::string_view name, absl::string_view schema,
                  absl::string_view tests) {
  return OrderedJson::parse(absl::StrCat("{\"name\":\"", name, "\",\"schema\":",
                                         schema, ",\"tests\":", tests, "}"));
}

SchemaResult RunSchema(const OrderedJson& entry,
                       const MaskBenchOptions& options,
                       std::vector<float>* tbm_us) {
  return RunMaskBenchSchema(entry, Gpt2Tokenizer(), Gpt2Trie(), options,
                            tbm_us);
}

TEST(MaskBenchTest, ASchemaPassesWhenEveryVerdictIsRight) {
  std::vector<float> tbm;
  const SchemaResult r = RunSchema(
      Entry("ints", R"({"type":"integer"})",
            R"([{"valid":true,"data":12345678},{"valid":true,"data":0},
                {"valid":false,"data":"x"},{"valid":false,"data":-3},
                {"valid":false,"data":[]}])"),
      Options(), &tbm);
  EXPECT_TRUE(r.passed()) << r.first_failure;
  EXPECT_TRUE(r.compile.ok());
  EXPECT_EQ(r.name, "ints");
  EXPECT_EQ(r.instances, 5);
  EXPECT_EQ(r.valid_rejected, 0);
  EXPECT_EQ(r.invalid_accepted, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_GT(r.ttfm_us, 0);
  // A valid instance takes a mask per token and one for its end; each
  // invalid one here stops at its first token.
  const int64_t long_tokens = Gpt2Tokenizer().Encode("12345678", false).size();
  EXPECT_EQ(r.tokens, long_tokens + 1);
  EXPECT_EQ(tbm.size(), (long_tokens + 1) + 2 + 3);
}

TEST(MaskBenchTest, AValidInstanceRefusedIsAValidationError) {
  std::vector<float> tbm;
  const SchemaResult r = RunSchema(
      Entry("colours", R"({"enum":["red","green"]})",
            R"([{"valid":true,"data":"green"},{"valid":true,"data":"blue"},
                {"valid":true,"data":"gre"}])"),
      Options(), &tbm);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.valid_rejected, 2);
  EXPECT_EQ(r.invalid_accepted, 0);
  // The first failure names the instance and where it went wrong: "blue"
  // at a token, 12 (a prefix of a value) at its end.
  EXPECT_TRUE(absl::StartsWith(r.first_failure, "instance 1 (valid): token"))
      << r.first_failure;
  std::vector<float> tbm2;
  const SchemaResult prefix = RunSchema(
      Entry("n", R"({"enum":[123]})", R"([{"valid":true,"data":12}])"),
      Options(), &tbm2);
  EXPECT_TRUE(absl::StrContains(prefix.first_failure, "the end refused"))
      << prefix.first_failure;
}

TEST(MaskBenchTest, AnInvalidInstanceAcceptedIsAnInvalidationError) {
  std::vector<float> tbm;
  const SchemaResult r = RunSchema(
      Entry("ints", R"({"type":"integer"})",
            R"([{"valid":false,"data":7,"description":"too small"}])"),
      Options(), &tbm);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.invalid_accepted, 1);
  EXPECT_EQ(r.valid_rejected, 0);
  EXPECT_EQ(r.first_failure, "instance 0 (invalid: too small) accepted: `7`");
}

TEST(MaskBenchTest, AFrontEndErrorIsACompileError) {
  std::vector<float> tbm;
  const SchemaResult r = RunSchema(
      Entry("min", R"({"minimum":3})", R"([{"valid":true,"data":3}])"),
      Options(), &tbm);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.compile.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(r.instances, 0);
  EXPECT_TRUE(tbm.empty());
  EXPECT_EQ(CompileErrorKey(r.compile), "UNIMPLEMENTED: minimum");
}

TEST(MaskBenchTest, AnEmptyLanguageIsACompileError) {
  // Compile refuses a root that matches nothing.
  MaskBenchOptions options = Options();
  options.to_grammar = [](const OrderedJson&) -> absl::StatusOr<Grammar> {
    Grammar g;
    const auto root = g.AddRule("root");
    g.SetRule(root, g.Nothing());
    g.set_root(root);
    return g;
  };
  std::vector<float> tbm;
  const SchemaResult r = RunSchema(
      Entry("false", "false", R"([{"valid":false,"data":1}])"), options, &tbm);
  EXPECT_FALSE(r.compile.ok());
  EXPECT_FALSE(r.passed());
}

TEST(MaskBenchTest, PastItsBudgetASchemaTimesOut) {
  MaskBenchOptions options = Options();
  options.schema_budget = absl::ZeroDuration();
  std::vector<float> tbm;
  const SchemaResult r = RunSchema(
      Entry("ints", R"({"type":"integer"})", R"([{"valid":true,"data":1}])"),
      options, &tbm);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.instances, 0);
}

constexpr char kFile[] =
    R"({"name":"a","schema":{"type":"integer"},"tests":[{"valid":true,"data":1}]}
{"name":"b","schema":{"minimum":1},"tests":[]}
{"name":"c","schema":{"enum":[1]},"tests":[{"valid":false,"data":1}]}
{"name":"d","schema":{"maximum":1},"tests":[]}
{"name":"e","schema":{"enum":[1,2]},"tests":[{"valid":true,"data":3}]}
)";

TEST(MaskBenchTest, RunsEveryKthSchemaUpToTheLimit) {
  MaskBenchOptions options = Options();
  options.sample_every = 2;
  auto report = RunMaskBench(kFile, Gpt2Tokenizer(), Gpt2Trie(), options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::vector<std::string> names;
  for (const SchemaResult& r : report->schemas) names.push_back(r.name);
  EXPECT_EQ(absl::StrJoin(names, ","), "a,c,e");
  EXPECT_EQ(report->lines, 5);
  EXPECT_EQ(report->passing(), 1);
  EXPECT_EQ(report->compile_errors(), 0);
  EXPECT_EQ(report->validation_errors(), 1);
  EXPECT_EQ(report->invalidation_errors(), 1);
  EXPECT_EQ(report->timeouts(), 0);
  EXPECT_EQ(report->ttfm_us.size(), 3u);
  EXPECT_EQ(report->instances, 3);

  options.sample_every = 1;
  options.limit = 2;
  report = RunMaskBench(kFile, Gpt2Tokenizer(), Gpt2Trie(), options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->schemas.size(), 2u);
  EXPECT_EQ(report->compile_errors(), 1);
  EXPECT_EQ(report->ttfm_us.size(), 1u);
}

TEST(MaskBenchTest, ABrokenLineIsAnError) {
  for (absl::string_view line :
       {"{\"name\":\"x\"", R"({"name":"x","tests":[]})",
        R"({"schema":{},"tests":[{"data":1}]})"}) {
    auto report = RunMaskBench(line, Gpt2Tokenizer(), Gpt2Trie(), Options());
    EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument)
        << line;
  }
}

TEST(MaskBenchTest, ReportsTheTableTheErrorsAndTheNames) {
  auto report = RunMaskBench(kFile, Gpt2Tokenizer(), Gpt2Trie(), Options());
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string md = MaskBenchMarkdown(*report);
  for (absl::string_view row :
       {"| TBM p50 | ", "| TBM p99 | ", "| TBM p99.9 | ", "| TTFM p50 | ",
        "| TTFM p99 | ", "| schemas passing | 1 |", "| compile errors | 2 |",
        "| validation errors | 1 |", "| invalidation errors | 1 |",
        "| crashes / timeouts | 0 / 0 |",
        "| UNIMPLEMENTED: minimum | 1 | b: 'minimum' at # is not supported |",
        "| UNIMPLEMENTED: maximum | 1 |", "- `e`: instance 0 (valid)",
        "- `c`: instance 0 (invalid) accepted: `1`"}) {
    EXPECT_TRUE(absl::StrContains(md, row)) << row << "\nin\n" << md;
  }
  const nlohmann::json json = MaskBenchJson(*report);
  EXPECT_EQ(json["schemas"], 5);
  EXPECT_EQ(json["passing"], 1);
  EXPECT_EQ(json["compile_errors"], 2);
  EXPECT_EQ(json["compile_error_groups"].size(), 2u);
  ASSERT_EQ(json["results"].size(), 5u);
  EXPECT_EQ(json["results"][1]["compile_error"],
            "UNIMPLEMENTED: 'minimum' at # is not supported");
  EXPECT_EQ(json["results"][0]["passed"], true);
}

TEST(MaskBenchTest, PercentilesAreNearestRank) {
  std::vector<float> values;
  for (int i = 100; i >= 1; --i) values.push_back(i);
  EXPECT_EQ(Percentile(values, 0.5), 50);
  EXPECT_EQ(Percentile(values, 0.99), 99);
  EXPECT_EQ(Percentile(values, 0.999), 100);
  EXPECT_EQ(Percentile({7}, 0.5), 7);
  EXPECT_EQ(Percentile({}, 0.5), 0);
}

TEST(MaskBenchTest, CompileErrorsGroupByTheirKeyword) {
  EXPECT_EQ(CompileErrorKey(absl::UnimplementedError(
                "\"patternProperties\" at /properties/a")),
            "UNIMPLEMENTED: patternProperties");
  EXPECT_EQ(CompileErrorKey(absl::InvalidArgumentError(
                "maxLength 12 below minLength 30 at /items/3")),
            "INVALID_ARGUMENT: maxLength N below minLength N");
  EXPECT_EQ(CompileErrorKey(absl::ResourceExhaustedError(
                "rule 'members-444': the grammar's automata need too many "
                "states")),
            "RESOURCE_EXHAUSTED: rule '_': the grammar's automata need too "
            "many states");
  EXPECT_EQ(CompileErrorKey(absl::InvalidArgumentError(
                "unresolvable reference #/definitions/x")),
            "INVALID_ARGUMENT: unresolvable reference");
}

TEST(MaskBenchTest, ReadsTheGzippedFile) {
  auto text = ReadGzipFile(MaskBenchPath());
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(absl::StartsWith(*text, "{\"name\":")) << text->substr(0, 80);
  EXPECT_EQ(ReadGzipFile(MaskBenchPath() + ".absent").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace paceline::testing
