#include "tests/testing/maskbench.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/grammar_mask.h"
#include "engine/sampling/grammar/mask_tables.h"
#include "engine/sampling/row_sampling_math.h"
#include "tests/testing/build_paths.h"

namespace paceline::testing {
namespace {

using Clock = std::chrono::steady_clock;
using engine::grammar::GrammarMask;
using engine::grammar::MaskTables;
using OrderedJson = nlohmann::ordered_json;

float MicrosSince(Clock::time_point start) {
  return std::chrono::duration<float, std::micro>(Clock::now() - start).count();
}

// `text` shortened to its last `n` bytes for a message.
std::string Tail(absl::string_view text, size_t n) {
  if (text.size() <= n) return std::string(text);
  return absl::StrCat("...", text.substr(text.size() - n));
}

// One instance fed through a fresh mask over `tables`.
struct Feed {
  bool accepted = false;
  bool mismatch = false;   // the mask and Accept disagree on a token
  bool timed_out = false;  // stopped at the deadline, undecided
  std::string refusal;     // where it was refused
};

Feed FeedInstance(const std::shared_ptr<MaskTables>& tables,
                  const engine::Tokenizer& tokenizer, absl::string_view text,
                  Clock::time_point deadline, std::vector<uint32_t>* mask,
                  std::vector<float>* tbm_us, int64_t* tokens) {
  const std::vector<int32_t> ids = tokenizer.Encode(text, /*add_bos=*/false);
  const engine::grammar::TokenTrie& vocab = tables->vocab();
  GrammarMask grammar_mask(tables);
  Feed feed;
  std::string read;  // the text accepted so far
  for (size_t i = 0; i <= ids.size(); ++i) {
    const Clock::time_point start = Clock::now();
    grammar_mask.Fill(absl::MakeSpan(*mask));
    tbm_us->push_back(MicrosSince(start));
    if (i == ids.size()) break;
    const absl::string_view bytes = vocab.bytes(ids[i]);
    if (!engine::MaskAllows(mask->data(), ids[i])) {
      feed.mismatch = grammar_mask.Accept(ids[i]).ok();
      feed.refusal =
          absl::StrCat("token ", i, " `", bytes, "` refused",
                       feed.mismatch ? " by the mask, not Accept," : "",
                       " after `", Tail(read, 40), "`");
      return feed;
    }
    if (!grammar_mask.Accept(ids[i]).ok()) {
      feed.mismatch = true;
      feed.refusal = absl::StrCat("token ", i, " `", bytes,
                                  "` allowed by the mask, refused by Accept "
                                  "after `",
                                  Tail(read, 40), "`");
      return feed;
    }
    absl::StrAppend(&read, bytes);
    ++*tokens;
    if (Clock::now() > deadline) {
      feed.timed_out = true;
      return feed;
    }
  }
  for (int32_t eog : vocab.eog_ids()) {
    if (!engine::MaskAllows(mask->data(), eog)) continue;
    if (!grammar_mask.Accept(eog).ok()) {
      feed.mismatch = true;
      feed.refusal = "the end allowed by the mask, refused by Accept";
      return feed;
    }
    feed.accepted = true;
    return feed;
  }
  const int32_t eos = vocab.eog_ids().empty() ? -1 : vocab.eog_ids()[0];
  feed.mismatch = eos >= 0 && grammar_mask.Accept(eos).ok();
  feed.refusal = absl::StrCat("the end refused",
                              feed.mismatch ? " by the mask, not Accept," : "",
                              " after `", Tail(read, 40), "`");
  return feed;
}

// Compiles `schema` into `*tables` and computes the first mask, timing
// the front end and Compile into `result`.
absl::Status CompileSchema(
    const OrderedJson& schema, const MaskBenchOptions& options,
    std::shared_ptr<const engine::grammar::TokenTrie> vocab,
    std::vector<uint32_t>* mask, std::shared_ptr<MaskTables>* tables,
    SchemaResult* result) {
  Clock::time_point start = Clock::now();
  absl::StatusOr<engine::grammar::Grammar> grammar = options.to_grammar(schema);
  result->grammar_us = MicrosSince(start);
  if (!grammar.ok()) return grammar.status();
  start = Clock::now();
  auto compiled = engine::grammar::Compile(*grammar);
  result->compile_us = MicrosSince(start);
  if (!compiled.ok()) return compiled.status();
  *tables = std::make_shared<MaskTables>(*std::move(compiled), std::move(vocab),
                                         options.shared);
  GrammarMask(*tables).Fill(absl::MakeSpan(*mask));
  return absl::OkStatus();
}

bool IsEntry(const OrderedJson& entry) {
  if (!entry.is_object() || !entry.contains("schema")) return false;
  const auto tests = entry.find("tests");
  if (tests == entry.end() || !tests->is_array()) return false;
  return std::all_of(tests->begin(), tests->end(), [](const OrderedJson& t) {
    return t.is_object() && t.contains("data") && t.contains("valid") &&
           t.find("valid")->is_boolean();
  });
}

std::string WithCommas(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

std::string Micros(double us) {
  return WithCommas(static_cast<int64_t>(std::llround(us)));
}

// Compile errors grouped by CompileErrorKey, largest group first: (key,
// count, an example message).
struct ErrorGroup {
  std::string key;
  int64_t count = 0;
  std::string example;
};

std::vector<ErrorGroup> GroupCompileErrors(const MaskBenchReport& report) {
  std::map<std::string, ErrorGroup> groups;
  for (const SchemaResult& r : report.schemas) {
    if (r.compile.ok()) continue;
    ErrorGroup& g = groups[CompileErrorKey(r.compile)];
    if (g.count++ == 0) {
      g.key = CompileErrorKey(r.compile);
      g.example = absl::StrCat(r.name, ": ", r.compile.message());
    }
  }
  std::vector<ErrorGroup> out;
  for (auto& [key, group] : groups) out.push_back(std::move(group));
  std::stable_sort(out.begin(), out.end(),
                   [](const ErrorGroup& a, const ErrorGroup& b) {
                     return a.count > b.count;
                   });
  return out;
}

// A Markdown table cell: no pipes or newlines, at most `n` bytes.
std::string Cell(absl::string_view text, size_t n = 160) {
  std::string out = absl::StrReplaceAll(
      text.substr(0, n), {{"|", "\\|"}, {"\n", " "}, {"\r", " "}});
  if (text.size() > n) out += "...";
  return out;
}

void AppendNames(const MaskBenchReport& report, absl::string_view title,
                 bool (*pick)(const SchemaResult&), std::string* out) {
  std::vector<const SchemaResult*> picked;
  for (const SchemaResult& r : report.schemas) {
    if (pick(r)) picked.push_back(&r);
  }
  absl::StrAppend(out, "\n", title, " (",
                  WithCommas(static_cast<int64_t>(picked.size())), " schemas",
                  picked.size() > 20 ? ", the first 20" : "", ")\n\n");
  if (picked.empty()) absl::StrAppend(out, "none\n");
  for (size_t i = 0; i < picked.size() && i < 20; ++i) {
    absl::StrAppend(out, "- `", picked[i]->name,
                    "`: ", Cell(picked[i]->first_failure), "\n");
  }
}

}  // namespace

int64_t MaskBenchReport::passing() const {
  return std::count_if(schemas.begin(), schemas.end(),
                       [](const SchemaResult& r) { return r.passed(); });
}
int64_t MaskBenchReport::compile_errors() const {
  return std::count_if(schemas.begin(), schemas.end(),
                       [](const SchemaResult& r) { return !r.compile.ok(); });
}
int64_t MaskBenchReport::validation_errors() const {
  return std::count_if(
      schemas.begin(), schemas.end(),
      [](const SchemaResult& r) { return r.valid_rejected > 0; });
}
int64_t MaskBenchReport::invalidation_errors() const {
  return std::count_if(
      schemas.begin(), schemas.end(),
      [](const SchemaResult& r) { return r.invalid_accepted > 0; });
}
int64_t MaskBenchReport::timeouts() const {
  return std::count_if(schemas.begin(), schemas.end(),
                       [](const SchemaResult& r) { return r.timed_out; });
}

absl::StatusOr<std::string> ReadGzipFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("no ", path));
  }
  const std::string command = absl::StrCat(
      "gzip -dc -- '", absl::StrReplaceAll(path, {{"'", "'\\''"}}), "'");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return absl::InternalError(absl::StrCat("cannot run ", command));
  }
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    text.append(buffer, n);
  }
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat(command, " failed (status ", status, ")"));
  }
  return text;
}

std::string MaskBenchPath() {
  return SharedPath("structured/maskbench.jsonl.gz");
}

SchemaResult RunMaskBenchSchema(
    const OrderedJson& entry, const engine::Tokenizer& tokenizer,
    std::shared_ptr<const engine::grammar::TokenTrie> vocab,
    const MaskBenchOptions& options, std::vector<float>* tbm_us) {
  SchemaResult result;
  result.name = entry.value("name", "");
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + absl::ToChronoMicroseconds(options.schema_budget);
  std::vector<uint32_t> mask(engine::MaskWords(vocab->vocab_size()));
  std::shared_ptr<MaskTables> tables;
  result.compile = CompileSchema(*entry.find("schema"), options,
                                 std::move(vocab), &mask, &tables, &result);
  result.seconds = MicrosSince(start) * 1e-6;
  if (!result.compile.ok()) return result;
  result.ttfm_us = MicrosSince(start);

  const OrderedJson& tests = *entry.find("tests");
  for (const OrderedJson& test : tests) {
    if (Clock::now() > deadline) {
      result.timed_out = true;
      break;
    }
    const bool valid = test.value("valid", false);
    const std::string text = test.find("data")->dump();
    Feed feed = FeedInstance(tables, tokenizer, text, deadline, &mask, tbm_us,
                             &result.tokens);
    if (feed.timed_out) {
      result.timed_out = true;
      break;
    }
    ++result.instances;
    result.mask_accept_mismatches += feed.mismatch;
    if (feed.accepted == valid && !feed.mismatch) continue;
    (valid ? result.valid_rejected : result.invalid_accepted) +=
        feed.accepted != valid;
    if (result.first_failure.empty()) {
      const std::string description = test.value("description", "");
      result.first_failure =
          valid || feed.mismatch
              ? absl::StrCat("instance ", result.instances - 1,
                             valid ? " (valid): " : " (invalid): ",
                             feed.refusal, " in `", Tail(text, 200), "`")
              : absl::StrCat("instance ", result.instances - 1, " (invalid",
                             description.empty() ? "" : ": ", description,
                             ") accepted: `", Tail(text, 200), "`");
    }
  }
  result.seconds = MicrosSince(start) * 1e-6;
  return result;
}

namespace {

// Names schema line `i` on stderr when a mask of `tbm` took over
// `slow_us` or its first mask over 50 ms.
void ReportSlow(size_t i, const SchemaResult& result,
                absl::Span<const float> tbm, float slow_us) {
  const int64_t over = std::count_if(tbm.begin(), tbm.end(),
                                     [&](float t) { return t > slow_us; });
  const float worst =
      tbm.empty() ? 0 : *std::max_element(tbm.begin(), tbm.end());
  if (over == 0 && result.ttfm_us <= 50'000) return;
  std::fprintf(stderr,
               "slow: line %zu ttfm %.0f over %lld of %zu max %.0f %s\n", i,
               result.ttfm_us, static_cast<long long>(over), tbm.size(), worst,
               result.name.c_str());
}

}  // namespace

absl::StatusOr<MaskBenchReport> RunMaskBench(
    absl::string_view jsonl, const engine::Tokenizer& tokenizer,
    std::shared_ptr<const engine::grammar::TokenTrie> vocab,
    const MaskBenchOptions& options) {
  const Clock::time_point start = Clock::now();
  MaskBenchReport report;
  report.sample_every = std::max(options.sample_every, 1);
  std::vector<absl::string_view> lines =
      absl::StrSplit(jsonl, '\n', absl::SkipWhitespace());
  report.lines = static_cast<int64_t>(lines.size());
  for (size_t i = 0; i < lines.size(); i += report.sample_every) {
    if (options.limit >= 0 &&
        static_cast<int64_t>(report.schemas.size()) >= options.limit) {
      break;
    }
    const OrderedJson entry =
        OrderedJson::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (!IsEntry(entry)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", i + 1,
          " is not an object with a schema and tests {valid, data}"));
    }
    const size_t before = report.tbm_us.size();
    SchemaResult result =
        RunMaskBenchSchema(entry, tokenizer, vocab, options, &report.tbm_us);
    if (options.slow_us > 0) {
      ReportSlow(i, result, absl::MakeConstSpan(report.tbm_us).subspan(before),
                 options.slow_us);
    }
    report.instances += result.instances;
    report.tokens += result.tokens;
    if (result.compile.ok()) report.ttfm_us.push_back(result.ttfm_us);
    report.schemas.push_back(std::move(result));
    if (options.progress_every > 0 &&
        report.schemas.size() % options.progress_every == 0) {
      std::fprintf(stderr, "maskbench: %zu schemas, %lld passing, %.1f s\n",
                   report.schemas.size(),
                   static_cast<long long>(report.passing()),
                   std::chrono::duration<double>(Clock::now() - start).count());
    }
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

double Percentile(std::vector<float> values, double q) {
  if (values.empty()) return 0;
  const double rank = std::ceil(q * static_cast<double>(values.size()));
  const size_t k = static_cast<size_t>(
      std::clamp(rank - 1, 0.0, static_cast<double>(values.size() - 1)));
  std::nth_element(values.begin(), values.begin() + k, values.end());
  return values[k];
}

std::string CompileErrorKey(const absl::Status& status) {
  const std::string code = absl::StatusCodeToString(status.code());
  const absl::string_view message = status.message();
  auto is_quote = [](char c) { return c == '\'' || c == '"' || c == '`'; };
  // "'keyword' at #/where ...": the keyword.
  if (!message.empty() && is_quote(message[0])) {
    const size_t end = message.find(message[0], 1);
    if (end != absl::string_view::npos && end > 1) {
      return absl::StrCat(code, ": ", message.substr(1, end - 1));
    }
  }
  // Else the message up to " at ", less what differs between schemas:
  // JSON pointers, names in quotes ('_'), numbers (N).
  std::string key;
  for (absl::string_view word :
       absl::StrSplit(message.substr(0, message.find(" at ")), ' ')) {
    if (!word.empty() && (word[0] == '/' || word[0] == '#')) continue;
    std::string w;
    const size_t close = word.size() > 1 && is_quote(word[0])
                             ? word.find(word[0], 1)
                             : absl::string_view::npos;
    if (close != absl::string_view::npos) {
      w = absl::StrCat(word.substr(0, 1), "_", word.substr(close));
    } else {
      for (char c : word) {
        if (!absl::ascii_isdigit(c)) {
          w.push_back(c);
        } else if (w.empty() || w.back() != 'N') {
          w.push_back('N');
        }
      }
    }
    absl::StrAppend(&key, key.empty() ? "" : " ", w);
  }
  return absl::StrCat(code, ": ", key.substr(0, 100));
}

std::string MaskBenchMarkdown(const MaskBenchReport& report) {
  const int64_t n = static_cast<int64_t>(report.schemas.size());
  std::string out = absl::StrCat(
      "| metric | Paceline |\n|---|---:|\n", "| TBM p50 | ",
      Micros(Percentile(report.tbm_us, 0.50)), " |\n", "| TBM p99 | ",
      Micros(Percentile(report.tbm_us, 0.99)), " |\n", "| TBM p99.9 | ",
      Micros(Percentile(report.tbm_us, 0.999)), " |\n", "| TTFM p50 | ",
      Micros(Percentile(report.ttfm_us, 0.50)), " |\n", "| TTFM p99 | ",
      Micros(Percentile(report.ttfm_us, 0.99)), " |\n", "| schemas passing | ",
      WithCommas(report.passing()), " |\n", "| compile errors | ",
      WithCommas(report.compile_errors()), " |\n", "| validation errors | ",
      WithCommas(report.validation_errors()), " |\n",
      "| invalidation errors | ", WithCommas(report.invalidation_errors()),
      " |\n", "| crashes / timeouts | 0 / ", WithCommas(report.timeouts()),
      " |\n");
  absl::StrAppend(&out, "\nTimes in µs. ", WithCommas(n), " of ",
                  WithCommas(report.lines), " schemas");
  if (report.sample_every > 1) {
    absl::StrAppend(&out, " (every ", report.sample_every, "th)");
  }
  absl::StrAppend(&out, ", ", WithCommas(report.instances), " instances, ",
                  WithCommas(report.tokens), " tokens, ",
                  WithCommas(static_cast<int64_t>(report.tbm_us.size())),
                  " masks, ", absl::StrFormat("%.1f", report.seconds), " s.\n");

  const std::vector<ErrorGroup> groups = GroupCompileErrors(report);
  absl::StrAppend(&out, "\nCompile errors by keyword (", groups.size(),
                  " groups", groups.size() > 20 ? ", the top 20" : "",
                  ")\n\n| error | schemas | for example |\n|---|---:|---|\n");
  for (size_t i = 0; i < groups.size() && i < 20; ++i) {
    absl::StrAppend(&out, "| ", Cell(groups[i].key, 100), " | ",
                    groups[i].count, " | ", Cell(groups[i].example), " |\n");
  }
  AppendNames(
      report, "Validation errors",
      [](const SchemaResult& r) { return r.valid_rejected > 0; }, &out);
  AppendNames(
      report, "Invalidation errors",
      [](const SchemaResult& r) { return r.invalid_accepted > 0; }, &out);
  AppendNames(
      report, "Mask/Accept disagreements",
      [](const SchemaResult& r) { return r.mask_accept_mismatches > 0; }, &out);
  AppendNames(
      report, "Timeouts", [](const SchemaResult& r) { return r.timed_out; },
      &out);
  return out;
}

nlohmann::json MaskBenchJson(const MaskBenchReport& report) {
  nlohmann::json out = {
      {"tbm_us",
       {{"p50", Percentile(report.tbm_us, 0.50)},
        {"p99", Percentile(report.tbm_us, 0.99)},
        {"p99.9", Percentile(report.tbm_us, 0.999)}}},
      {"ttfm_us",
       {{"p50", Percentile(report.ttfm_us, 0.50)},
        {"p99", Percentile(report.ttfm_us, 0.99)}}},
      {"schemas", report.schemas.size()},
      {"lines", report.lines},
      {"sample_every", report.sample_every},
      {"instances", report.instances},
      {"tokens", report.tokens},
      {"masks", report.tbm_us.size()},
      {"seconds", report.seconds},
      {"passing", report.passing()},
      {"compile_errors", report.compile_errors()},
      {"validation_errors", report.validation_errors()},
      {"invalidation_errors", report.invalidation_errors()},
      {"crashes", 0},
      {"timeouts", report.timeouts()},
  };
  nlohmann::json groups = nlohmann::json::array();
  for (const ErrorGroup& g : GroupCompileErrors(report)) {
    groups.push_back(
        {{"error", g.key}, {"schemas", g.count}, {"example", g.example}});
  }
  out["compile_error_groups"] = std::move(groups);
  nlohmann::json results = nlohmann::json::array();
  for (const SchemaResult& r : report.schemas) {
    nlohmann::json one = {{"name", r.name},
                          {"passed", r.passed()},
                          {"seconds", r.seconds},
                          {"grammar_us", r.grammar_us},
                          {"compile_us", r.compile_us}};
    if (!r.compile.ok()) {
      one["compile_error"] = r.compile.ToString();
    } else {
      one["ttfm_us"] = r.ttfm_us;
      one["instances"] = r.instances;
      one["valid_rejected"] = r.valid_rejected;
      one["invalid_accepted"] = r.invalid_accepted;
      if (r.mask_accept_mismatches > 0) {
        one["mask_accept_mismatches"] = r.mask_accept_mismatches;
      }
      if (r.timed_out) one["timed_out"] = true;
      if (!r.first_failure.empty()) one["first_failure"] = r.first_failure;
    }
    results.push_back(std::move(one));
  }
  out["results"] = std::move(results);
  return out;
}

}  // namespace paceline::testing
