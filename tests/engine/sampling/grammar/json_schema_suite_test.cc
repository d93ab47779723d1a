// The official JSON Schema Test Suite (draft 2020-12; shared/structured/
// README.md) against JsonSchemaToGrammar (json_schema.h). One test per
// keyword file, and one per file of optional/format/ (format as an
// assertion). For each group of the file the schema is compiled; then
//   - a refusal must be Unimplemented or InvalidArgument and name, as a
//     word, a keyword the schema contains (never a silent "anything");
//   - a grammar must accept each instance, serialized compactly
//     (ordered_json::dump(), UTF-8 kept), exactly when the suite says it is
//     valid. A grammar whose language is empty (the schema `false`) may be
//     refused by Compile; every instance must then be invalid.
// A failing test lists every wrong case with its schema, instance and
// expected verdict. kExcused lists, with a reason each, the verdicts that
// differ because of a convention the engine documents.
//
// Run the binary alone (not through ctest, which runs one test a process)
// to get the whole table for bench/RESULTS.md; it is printed at the end:
//   build/tests/engine/sampling/grammar/json_schema_suite_test --gtest_brief=1

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/json_schema.h"
#include "engine/sampling/grammar/matcher.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/build_paths.h"

namespace paceline::engine::grammar {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kSuiteDir[] = "structured/json-schema-test-suite/draft2020-12";

// A verdict that differs from the suite's because of a convention the
// engine documents. Keyed by file (relative to draft2020-12/), group
// description and test description. An entry whose case is right again is
// reported, so the list cannot go stale.
struct Excused {
  absl::string_view file;
  absl::string_view group;
  absl::string_view test;
  absl::string_view reason;
};

// json_schema_types.cc (FormatPattern): date, time, date-time, uuid, email,
// uri and ipv4 are asserted, as structured output wants; draft 2020-12's
// default, which format.json tests, is format as an annotation.
constexpr absl::string_view kAssertsFormat =
    "the engine asserts this format; the suite's default is an annotation";

// json_text.h: numbers are written without an exponent; an equal value
// spelled with one (nlohmann writes 9007199254740992.0 so) is not read.
constexpr absl::string_view kNoExponent =
    "the engine writes numbers without an exponent";

// json_schema_types.cc (FormatPattern): a leap second is accepted only as
// 23:59:60Z; the same instant written with an offset is not.
constexpr absl::string_view kLeapSecondUtc =
    "the engine accepts a leap second only as 23:59:60Z";

// json_schema_types.cc (FormatPattern): a URI's IP literal is any
// bracketed run of hex digits, ':' and '.', not RFC 3986's IPv6address.
constexpr absl::string_view kLooseIpLiteral =
    "the engine checks a URI's IP literal loosely";

// json_text.h: an integral value is written as an integer (1, not 1.0),
// in enum/const as for type integer.
constexpr absl::string_view kIntegerSpelling =
    "the engine writes integral numbers without a fraction";

constexpr Excused kExcused[] = {
    {"type.json", "integer type matches integers",
     "a float with zero fractional part is an integer", kIntegerSpelling},
    {"const.json", "const with 0 does not match other zero-like types",
     "float zero is valid", kIntegerSpelling},
    {"const.json", "const with 1 does not match true", "float one is valid",
     kIntegerSpelling},
    {"const.json", "const with -2.0 matches integer and float types",
     "float -2.0 is valid", kIntegerSpelling},
    {"enum.json", "enum with 0 does not match false", "float zero is valid",
     kIntegerSpelling},
    {"enum.json", "enum with [0] does not match [false]", "[0.0] is valid",
     kIntegerSpelling},
    {"enum.json", "enum with 1 does not match true", "float one is valid",
     kIntegerSpelling},
    {"enum.json", "enum with [1] does not match [true]", "[1.0] is valid",
     kIntegerSpelling},
    {"optional/format/uri.json", "validation of URIs",
     "leading zero in an embedded IPv4 address is invalid", kLooseIpLiteral},
    {"format.json", "date-time format",
     "invalid date-time string is only an annotation by default",
     kAssertsFormat},
    {"optional/format/date-time.json", "validation of date-time strings",
     "a valid date-time with a leap second, with minus offset", kLeapSecondUtc},
    {"optional/format/time.json", "validation of time strings",
     "valid leap second, zero time-offset", kLeapSecondUtc},
    {"optional/format/time.json", "validation of time strings",
     "valid leap second, positive time-offset", kLeapSecondUtc},
    {"optional/format/time.json", "validation of time strings",
     "valid leap second, large positive time-offset", kLeapSecondUtc},
    {"optional/format/time.json", "validation of time strings",
     "valid leap second, negative time-offset", kLeapSecondUtc},
    {"optional/format/time.json", "validation of time strings",
     "valid leap second, large negative time-offset", kLeapSecondUtc},
    {"const.json",
     "float and integers are equal up to 64-bit representation limits",
     "float is valid", kNoExponent},
    {"format.json", "email format",
     "invalid email string is only an annotation by default", kAssertsFormat},
    {"format.json", "ipv4 format",
     "invalid ipv4 string is only an annotation by default", kAssertsFormat},
    {"format.json", "date format",
     "invalid date string is only an annotation by default", kAssertsFormat},
    {"format.json", "time format",
     "invalid time string is only an annotation by default", kAssertsFormat},
    {"format.json", "uri format",
     "invalid uri string is only an annotation by default", kAssertsFormat},
    {"format.json", "uuid format",
     "invalid uuid string is only an annotation by default", kAssertsFormat},
};

const Excused* FindExcused(absl::string_view file, absl::string_view group,
                           absl::string_view test) {
  for (const Excused& e : kExcused) {
    if (e.file == file && e.group == group && e.test == test) return &e;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// Which keywords a refusal may name.

// Keywords whose keys are the author's names (properties, definitions,
// vocabularies); their values are schemas or lists of names.
bool KeysAreNames(absl::string_view keyword) {
  return keyword == "properties" || keyword == "patternProperties" ||
         keyword == "$defs" || keyword == "definitions" ||
         keyword == "dependentSchemas" || keyword == "dependentRequired" ||
         keyword == "$vocabulary";
}

// Keywords whose values are instances, not schemas.
bool ValueIsData(absl::string_view keyword) {
  return keyword == "const" || keyword == "enum" || keyword == "default" ||
         keyword == "examples";
}

// Every keyword the schema uses, at any depth.
void CollectKeywords(const Json& schema, std::set<std::string>* out) {
  if (schema.is_array()) {
    for (const Json& item : schema) CollectKeywords(item, out);
    return;
  }
  if (!schema.is_object()) return;
  for (const auto& [key, value] : schema.items()) {
    out->insert(key);
    if (ValueIsData(key)) continue;
    if (KeysAreNames(key) && value.is_object()) {
      for (const auto& [name, sub] : value.items()) CollectKeywords(sub, out);
    } else {
      CollectKeywords(value, out);
    }
  }
}

bool IsWordByte(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// Keywords that are also plain words name themselves only when quoted:
// "is not supported" names no `not`, "'not' at #" does.
bool IsPlainWord(absl::string_view k) {
  for (absl::string_view word :
       {"not", "if", "then", "else", "items", "contains", "properties",
        "required", "type", "format", "pattern", "const", "enum", "default"}) {
    if (k == word) return true;
  }
  return false;
}

// The keyword of `keywords` that `message` names first: a whole word, not
// an inner segment of a JSON pointer ("at /properties/a" names neither
// `properties` nor `a`; "at /items" names `items`). Empty if none.
std::string NamedKeyword(absl::string_view message,
                         const std::set<std::string>& keywords) {
  std::string named;
  size_t first = absl::string_view::npos;
  for (const std::string& k : keywords) {
    for (size_t pos = message.find(k); pos < first;
         pos = message.find(k, pos + 1)) {
      const char before = pos > 0 ? message[pos - 1] : ' ';
      const size_t end = pos + k.size();
      const char after = end < message.size() ? message[end] : ' ';
      if (IsWordByte(before) || before == '$' || IsWordByte(after)) continue;
      if (before == '/' && after == '/') continue;
      const bool quoted =
          before == after &&
          absl::string_view("'\"`").find(before) != absl::string_view::npos;
      if (IsPlainWord(k) && !quoted) continue;
      named = k;
      first = pos;
    }
  }
  return named;
}

// Whether `g`'s root derives no string at all: the least fixpoint of
// "derives some string" over expressions and rules.
bool DerivesNothing(const Grammar& g) {
  std::vector<char> expr_ok(g.num_exprs(), 0);
  std::vector<char> rule_ok(g.num_rules(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (ExprId id = 0; id < g.num_exprs(); ++id) {
      const Expr& e = g.expr(id);
      bool ok = false;
      switch (e.kind) {
        case ExprKind::kEmpty:
          ok = true;
          break;
        case ExprKind::kNothing:
          break;
        case ExprKind::kBytes:
          ok = !e.ranges.empty();
          break;
        case ExprKind::kSeq:
          ok = std::all_of(e.children.begin(), e.children.end(),
                           [&](ExprId c) { return expr_ok[c] != 0; });
          break;
        case ExprKind::kAlt:
          ok = std::any_of(e.children.begin(), e.children.end(),
                           [&](ExprId c) { return expr_ok[c] != 0; });
          break;
        case ExprKind::kRepeat:
          ok = e.min == 0 || expr_ok[e.children[0]];
          break;
        case ExprKind::kRef:
          ok = rule_ok[e.rule];
          break;
      }
      if (ok && !expr_ok[id]) expr_ok[id] = changed = true;
    }
    for (RuleId r = 0; r < g.num_rules(); ++r) {
      const ExprId body = g.rule(r).body;
      if (body >= 0 && expr_ok[body] && !rule_ok[r]) {
        rule_ok[r] = changed = true;
      }
    }
  }
  return g.root() < 0 || !rule_ok[g.root()];
}

// ---------------------------------------------------------------------------
// Running a file.

struct SuiteFile {
  std::string path;  // relative to draft2020-12/
  std::string name;  // the gtest name: the path's stem, sanitized
};

// gtest prints a failing parameter with this.
void PrintTo(const SuiteFile& file, std::ostream* os) { *os << file.path; }

struct FileReport {
  std::string path;
  int groups = 0;
  int compiled = 0;  // a grammar (its language maybe empty)
  int refused = 0;   // an error naming a keyword of the schema
  int bad_errors = 0;
  int tests = 0;  // all instances, those of refused groups too
  int right = 0;
  int wrong = 0;
  int excused = 0;                    // wrong, but listed in kExcused
  std::vector<std::string> problems;  // one per wrong case or bad error
  std::vector<std::string> log;       // refusals, empty languages, excuses
};

std::string Where(const FileReport& report, const Json& group) {
  return absl::StrCat(report.path, " / \"",
                      group.value("description", std::string()), "\"");
}

// The compiled schema, or null when its language is empty; an error when
// compiling failed otherwise.
absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompileSchema(
    const Json& schema) {
  absl::StatusOr<Grammar> g = JsonSchemaToGrammar(schema);
  if (!g.ok()) return g.status();
  auto compiled = Compile(*g);
  if (compiled.ok()) return *std::move(compiled);
  if (DerivesNothing(*g)) return nullptr;
  return absl::Status(compiled.status().code(),
                      absl::StrCat("Compile: ", compiled.status().message()));
}

// A refusal: acceptable when its code says "not enforced" or "not a valid
// schema" and it names a keyword the schema contains.
void CheckRefusal(const Json& group, const absl::Status& status,
                  FileReport* report) {
  std::set<std::string> keywords;
  CollectKeywords(group.at("schema"), &keywords);
  const bool code_ok = status.code() == absl::StatusCode::kUnimplemented ||
                       status.code() == absl::StatusCode::kInvalidArgument;
  const std::string keyword = NamedKeyword(status.message(), keywords);
  if (code_ok && !keyword.empty()) {
    ++report->refused;
    report->log.push_back(absl::StrCat("refused: ", Where(*report, group), " [",
                                       keyword, "]: ", status.message()));
    return;
  }
  ++report->bad_errors;
  report->problems.push_back(absl::StrCat(
      Where(*report, group), ": refused with ", status.ToString(), "\n  ",
      code_ok ? "the message names no keyword of the schema"
              : "expected Unimplemented or InvalidArgument",
      "\n  schema: ", group.at("schema").dump()));
}

void RunTests(const Json& group,
              const std::shared_ptr<const CompiledGrammar>& compiled,
              FileReport* report) {
  const std::string group_name = group.value("description", std::string());
  for (const Json& test : group.at("tests")) {
    const std::string text = test.at("data").dump();
    const bool valid = test.at("valid").get<bool>();
    bool accepted = false;
    if (compiled != nullptr) {
      Matcher m(compiled);
      accepted = m.AcceptBytes(text) && m.CanFinish();
    }
    const std::string test_name = test.value("description", std::string());
    const Excused* excused = FindExcused(report->path, group_name, test_name);
    const std::string where =
        absl::StrCat(Where(*report, group), " / \"", test_name, "\"");
    if (accepted == valid) {
      ++report->right;
      if (excused != nullptr) {
        report->problems.push_back(
            absl::StrCat(where, ": right now; remove it from kExcused"));
      }
      continue;
    }
    if (excused != nullptr) {
      ++report->excused;
      report->log.push_back(
          absl::StrCat("excused: ", where, ": ", excused->reason));
      continue;
    }
    ++report->wrong;
    report->problems.push_back(
        absl::StrCat(where, "\n  schema:   ", group.at("schema").dump(),
                     "\n  data:     ", text, "\n  expected: ",
                     valid ? "valid, but the grammar rejects it"
                           : "invalid, but the grammar accepts it",
                     compiled == nullptr ? " (its language is empty)" : ""));
  }
}

FileReport RunFile(const std::string& path) {
  FileReport report;
  report.path = path;
  std::ifstream in(
      ::paceline::testing::SharedPath(absl::StrCat(kSuiteDir, "/", path)));
  if (!in) {
    report.problems.push_back(absl::StrCat(path, ": cannot be read"));
    return report;
  }
  const Json groups = Json::parse(in);
  for (const Json& group : groups) {
    ++report.groups;
    report.tests += static_cast<int>(group.at("tests").size());
    auto compiled = CompileSchema(group.at("schema"));
    if (!compiled.ok()) {
      CheckRefusal(group, compiled.status(), &report);
      continue;
    }
    ++report.compiled;
    if (*compiled == nullptr) {
      report.log.push_back(
          absl::StrCat("empty language: ", Where(report, group)));
    }
    RunTests(group, *compiled, &report);
  }
  return report;
}

// ---------------------------------------------------------------------------
// The table.

std::string TableHeader() {
  return "| file | groups | compiled | refused | bad errors | tests | right "
         "| wrong | excused |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
}

std::string TableRow(const FileReport& r) {
  return absl::StrFormat("| %s | %d | %d | %d | %d | %d | %d | %d | %d |\n",
                         r.path, r.groups, r.compiled, r.refused, r.bad_errors,
                         r.tests, r.right, r.wrong, r.excused);
}

// Every file's report in this process, for the table printed at its end.
std::vector<FileReport>& Reports() {
  static auto* const reports = new std::vector<FileReport>;
  return *reports;
}

class TableEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    std::vector<FileReport>& reports = Reports();
    if (reports.empty()) return;
    std::sort(reports.begin(), reports.end(),
              [](const FileReport& a, const FileReport& b) {
                return a.path < b.path;
              });
    // One total for the keyword files, one for each subfolder.
    std::map<std::string, FileReport> totals;
    std::string table = TableHeader();
    for (const FileReport& r : reports) {
      table += TableRow(r);
      const size_t slash = r.path.rfind('/');
      FileReport& t =
          totals[slash == std::string::npos ? "keywords"
                                            : r.path.substr(0, slash)];
      t.groups += r.groups;
      t.compiled += r.compiled;
      t.refused += r.refused;
      t.bad_errors += r.bad_errors;
      t.tests += r.tests;
      t.right += r.right;
      t.wrong += r.wrong;
      t.excused += r.excused;
    }
    for (auto& [name, t] : totals) {
      t.path = absl::StrCat("**total, ", name, "**");
      table += TableRow(t);
    }
    std::cout << "\nJSON Schema Test Suite, draft 2020-12:\n\n" << table;
  }
};

[[maybe_unused]] ::testing::Environment* const kTableEnvironment =
    ::testing::AddGlobalTestEnvironment(new TableEnvironment);

// ---------------------------------------------------------------------------
// The tests.

// The *.json files of draft2020-12/`subdir` (no subfolders), sorted.
std::vector<SuiteFile> ListFiles(absl::string_view subdir) {
  std::vector<SuiteFile> files;
  const std::filesystem::path dir = ::paceline::testing::SharedPath(
      absl::StrCat(kSuiteDir, subdir.empty() ? "" : "/", subdir));
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") {
      continue;
    }
    SuiteFile file;
    file.path = absl::StrCat(subdir, subdir.empty() ? "" : "/",
                             entry.path().filename().string());
    file.name = entry.path().stem().string();
    for (char& c : file.name) {
      if (!absl::ascii_isalnum(c)) c = '_';
    }
    files.push_back(std::move(file));
  }
  std::sort(
      files.begin(), files.end(),
      [](const SuiteFile& a, const SuiteFile& b) { return a.path < b.path; });
  return files;
}

TEST(JsonSchemaSuiteTest, RefusalsNameKeywordsAsWords) {
  const std::set<std::string> keywords = {"$ref", "not", "items", "properties",
                                          "uniqueItems"};
  EXPECT_EQ(NamedKeyword("'uniqueItems' at # is not supported", keywords),
            "uniqueItems");
  EXPECT_EQ(NamedKeyword("'not' at #: only types", keywords), "not");
  EXPECT_EQ(NamedKeyword("$ref to http://x/y.json", keywords), "$ref");
  EXPECT_EQ(NamedKeyword("at /items", keywords), "");  // a plain word
  EXPECT_EQ(NamedKeyword("is not supported", keywords), "");
  EXPECT_EQ(NamedKeyword("at /properties/a: bad", keywords), "");
  EXPECT_EQ(NamedKeyword("'$refs' or 'xitems'", keywords), "");
  EXPECT_EQ(NamedKeyword("'uniqueItems' at /uniqueItems", keywords),
            "uniqueItems");
}

// root ::= loop | nothing; loop ::= 'a' loop, or also 'b' when `can_end`.
Grammar LoopGrammar(bool can_end) {
  Grammar g;
  const RuleId root = g.AddRule("root");
  const RuleId loop = g.AddRule("loop");
  const ExprId more = g.Seq({g.Byte('a'), g.Ref(loop)});
  g.SetRule(loop, can_end ? g.Alt({g.Byte('b'), more}) : more);
  g.SetRule(root, g.Alt({g.Ref(loop), g.Nothing()}));
  g.set_root(root);
  return g;
}

TEST(JsonSchemaSuiteTest, EmptyLanguagesAreFound) {
  EXPECT_TRUE(DerivesNothing(LoopGrammar(/*can_end=*/false)));
  EXPECT_FALSE(DerivesNothing(LoopGrammar(/*can_end=*/true)));
}

TEST(JsonSchemaSuiteTest, FilesArePresent) {
  EXPECT_GE(ListFiles("").size(), 40u) << "shared/" << kSuiteDir;
  EXPECT_GE(ListFiles("optional/format").size(), 10u);
}

class SuiteFileTest : public ::testing::TestWithParam<SuiteFile> {};

TEST_P(SuiteFileTest, MatchesSuite) {
  FileReport report = RunFile(GetParam().path);
  for (const std::string& line : report.log) std::cout << line << "\n";
  std::cout << TableHeader() << TableRow(report);
  RecordProperty("groups_compiled", report.compiled);
  RecordProperty("groups_refused", report.refused);
  RecordProperty("groups_bad_errors", report.bad_errors);
  RecordProperty("tests_right", report.right);
  RecordProperty("tests_wrong", report.wrong);
  RecordProperty("tests_excused", report.excused);
  for (const std::string& problem : report.problems) ADD_FAILURE() << problem;
  Reports().push_back(std::move(report));
}

std::string TestName(const ::testing::TestParamInfo<SuiteFile>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Keyword, SuiteFileTest,
                         ::testing::ValuesIn(ListFiles("")), TestName);
INSTANTIATE_TEST_SUITE_P(OptionalFormat, SuiteFileTest,
                         ::testing::ValuesIn(ListFiles("optional/format")),
                         TestName);

}  // namespace
}  // namespace paceline::engine::grammar
