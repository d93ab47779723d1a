// `paceline grammar (--json-schema FILE | --grammar FILE | --regex P |
// --choice A,B)`: compiles a structured-output constraint as the daemon
// does and says what it became, whether sample texts belong to its
// language (and where one is refused), and, with a model, what the first
// token mask costs. The tool to reach for when a schema is refused.

#include <bit>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "engine/gguf/gguf_file.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/constraint.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/mask_tables.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/sampling/row_sampling_math.h"
#include "engine/tokenizer/tokenizer.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"
#include "tools/paceline/constraint_flags.h"
#include "tools/paceline/json_parse.h"

namespace paceline::tools {
namespace {

namespace gr = ::paceline::engine::grammar;

constexpr char kUsage[] =
    "usage: paceline grammar (--json-schema FILE | --grammar FILE |\n"
    "         --regex PATTERN | --choice A,B,C) [--flexible-whitespace]\n"
    "         [--check FILE]... [--model MODEL.gguf] [--print]\n"
    "\n"
    "Compiles a structured-output constraint as the daemon compiles\n"
    "SamplingOptions.constraint (`paceline generate` and `complete` take the\n"
    "same flags) and reports:\n"
    "  kind: KIND [(compact|flexible) whitespace]\n"
    "  grammar: R rules, E expressions\n"
    "  automata: S states, BYTES\n"
    "  compile: T ms (grammar G ms, automata A ms)\n"
    "Each --check FILE then prints one line:\n"
    "  check FILE: accepted\n"
    "  check FILE: refused at byte N of M: \"BEFORE\" | \"AFTER\"\n"
    "N is the first byte refused, or M when the text ends before the\n"
    "language does; BEFORE and AFTER are up to 24 bytes either side. The\n"
    "text checked is FILE's bytes less one trailing newline or, for\n"
    "--json-schema, FILE's JSON written compactly (nlohmann's dump(): no\n"
    "whitespace, keys in the file's order, numbers as it writes them), so a\n"
    "pretty-printed instance checks the same and N counts in the compact\n"
    "text. Exit 0 when every check passes, 1 when one is refused, 2 on a\n"
    "usage error or when the constraint does not compile (the compiler's\n"
    "message names the keyword, rule or part of the pattern it refuses).\n"
    "\n";

constexpr char kGrammarFlagsHelp[] =
    "  --check FILE       check FILE's text (repeatable)\n"
    "  --model FILE       a GGUF model: also build its vocabulary trie and\n"
    "                     the first token mask, and print\n"
    "                       vocabulary: V tokens, trie of N nodes in T ms\n"
    "                       first mask: K of V tokens allowed in T ms\n"
    "  --print            print the grammar, one rule a line\n"
    "                     (name ::= body)\n";

std::string Usage() {
  return absl::StrCat(kUsage, kConstraintFlagsHelp, kGrammarFlagsHelp);
}

constexpr FlagDef kFlags[] = {
    kJsonSchemaFlag,         kGrammarFlag,    kRegexFlag,      kChoiceFlag,
    kFlexibleWhitespaceFlag, {"check", true}, {"model", true}, {"print", false},
};

struct CheckFile {
  std::string path;
  std::string bytes;
};

struct GrammarFlags {
  gr::Constraint constraint;
  std::vector<CheckFile> checks;
  std::string model;  // empty: none
  bool print = false;
};

absl::StatusOr<GrammarFlags> ReadFlags(const ParsedArgs& args) {
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  GrammarFlags f;
  ASSIGN_OR_RETURN(std::optional<gr::Constraint> c, ReadConstraintFlags(args));
  if (!c.has_value()) {
    return absl::InvalidArgumentError(
        "give one of --json-schema, --grammar, --regex and --choice");
  }
  f.constraint = *std::move(c);
  for (const std::string& path : args.GetAll("check")) {
    absl::StatusOr<std::string> bytes = ReadWholeFile(path);
    if (!bytes.ok()) return ForFlag("check", bytes.status());
    f.checks.push_back({path, *std::move(bytes)});
  }
  f.model = args.Get("model").value_or("");
  f.print = args.Has("print");
  return f;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

struct Compiled {
  gr::Grammar grammar;
  std::shared_ptr<const gr::CompiledGrammar> automata;
  absl::Duration grammar_time;
  absl::Duration automata_time;
};

// The daemon's compile (grammar_cache.h): its default options and limits.
absl::StatusOr<Compiled> CompileConstraint(const gr::Constraint& c) {
  Compiled out;
  absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(out.grammar, gr::ConstraintGrammar(c));
  out.grammar_time = absl::Now() - start;
  start = absl::Now();
  ASSIGN_OR_RETURN(out.automata, gr::Compile(out.grammar));
  out.automata_time = absl::Now() - start;
  return out;
}

bool IsJson(const gr::Constraint& c) {
  return c.kind == gr::Constraint::Kind::kJsonSchema ||
         c.kind == gr::Constraint::Kind::kJsonObject;
}

void PrintSummary(const gr::Constraint& c, const Compiled& g) {
  std::cout << "kind: " << gr::ConstraintKindName(c.kind);
  if (IsJson(c)) {
    std::cout << (c.flexible_whitespace ? " (flexible" : " (compact")
              << " whitespace)";
  }
  std::cout << absl::StrFormat(
      "\ngrammar: %d rules, %d expressions\n"
      "automata: %d states, %s\n"
      "compile: %.3f ms (grammar %.3f ms, automata %.3f ms)\n",
      g.grammar.num_rules(), g.grammar.num_exprs(), g.automata->num_states(),
      HumanBytes(static_cast<uint64_t>(g.automata->memory_bytes())),
      Ms(g.grammar_time + g.automata_time), Ms(g.grammar_time),
      Ms(g.automata_time));
}

// The vocabulary trie of the model's tokenizer, and the first token mask
// over it (the tables' Fill at the grammar's start), timed.
absl::Status ReportModel(const std::string& path,
                         std::shared_ptr<const gr::CompiledGrammar> automata) {
  ASSIGN_OR_RETURN(std::unique_ptr<engine::GgufFile> file,
                   engine::GgufFile::Open(path));
  ASSIGN_OR_RETURN(std::unique_ptr<engine::Tokenizer> tokenizer,
                   engine::Tokenizer::FromGguf(*file));
  absl::Time start = absl::Now();
  std::shared_ptr<const gr::TokenTrie> vocab =
      gr::TokenTrie::FromTokenizer(*tokenizer);
  const absl::Duration trie_time = absl::Now() - start;
  std::cout << absl::StrFormat(
      "vocabulary: %d tokens, trie of %d nodes in "
      "%.3f ms\n",
      vocab->vocab_size(), vocab->num_nodes(), Ms(trie_time));

  gr::MaskTables tables(automata, vocab);
  const gr::Matcher matcher(automata);
  std::vector<uint32_t> allowed(engine::MaskWords(vocab->vocab_size()), 0u);
  start = absl::Now();
  tables.Fill(matcher.stacks(), absl::MakeSpan(allowed));
  const absl::Duration fill_time = absl::Now() - start;
  int64_t count = 0;
  for (uint32_t word : allowed) count += std::popcount(word);
  std::cout << absl::StrFormat(
      "first mask: %d of %d tokens allowed in %.3f ms%s\n", count,
      vocab->vocab_size(), Ms(fill_time),
      matcher.CanFinish() ? " (and end of generation: the empty text is in "
                            "the language)"
                          : "");
  return absl::OkStatus();
}

// What --check compares: for JSON kinds the file's JSON written compactly,
// else its bytes less one trailing newline. Not JSON: InvalidArgument
// with the parser's message.
absl::StatusOr<std::string> CheckedText(const gr::Constraint& c,
                                        const CheckFile& file) {
  if (IsJson(c)) {
    ASSIGN_OR_RETURN(const nlohmann::ordered_json value,
                     ParseJson(file.bytes, "not JSON"));
    return value.dump(-1, ' ', false,
                      nlohmann::ordered_json::error_handler_t::replace);
  }
  absl::string_view text = file.bytes;
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return std::string(text);
}

// The first byte of `text` the matcher refuses; text.size() when it reads
// every byte but the grammar cannot end there; nullopt when accepted.
std::optional<size_t> RefusedAt(
    const std::shared_ptr<const gr::CompiledGrammar>& automata,
    absl::string_view text) {
  gr::Matcher matcher(automata);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!matcher.AcceptByte(static_cast<uint8_t>(text[i]))) return i;
  }
  if (!matcher.CanFinish()) return text.size();
  return std::nullopt;
}

// `"BEFORE" | "AFTER"`: up to kContext bytes either side of `at`, quoted.
std::string Around(absl::string_view text, size_t at) {
  constexpr size_t kContext = 24;
  const size_t from = at > kContext ? at - kContext : 0;
  return absl::StrCat(from > 0 ? "..." : "",
                      JsonQuote(text.substr(from, at - from)), " | ",
                      JsonQuote(text.substr(at, kContext)),
                      at + kContext < text.size() ? "..." : "");
}

// Prints the check's verdict; true when accepted.
bool Check(const gr::Constraint& c,
           const std::shared_ptr<const gr::CompiledGrammar>& automata,
           const CheckFile& file) {
  std::cout << "check " << file.path << ": ";
  absl::StatusOr<std::string> text = CheckedText(c, file);
  if (!text.ok()) {
    std::cout << "refused: " << text.status().message() << "\n";
    return false;
  }
  const std::optional<size_t> at = RefusedAt(automata, *text);
  if (!at.has_value()) {
    std::cout << "accepted\n";
    return true;
  }
  std::cout << "refused at byte " << *at << " of " << text->size();
  if (*at == text->size()) std::cout << " (the text ends too soon)";
  if (IsJson(c)) std::cout << " (of the compact JSON)";
  std::cout << ": " << Around(*text, *at) << "\n";
  return false;
}

int RunGrammarCommand(const GrammarFlags& f) {
  absl::StatusOr<Compiled> compiled = CompileConstraint(f.constraint);
  if (!compiled.ok()) {
    std::cerr << "paceline grammar: error: "
              << ConstraintFlagName(f.constraint.kind) << ": "
              << compiled.status().message() << "\n";
    return kExitUsage;
  }
  PrintSummary(f.constraint, *compiled);
  if (f.print) std::cout << compiled->grammar.ToString();
  if (!f.model.empty()) {
    if (absl::Status s = ReportModel(f.model, compiled->automata); !s.ok()) {
      std::cout << std::flush;
      return Failure("grammar", s);
    }
  }
  bool all_accepted = true;
  for (const CheckFile& file : f.checks) {
    all_accepted &= Check(f.constraint, compiled->automata, file);
  }
  std::cout << std::flush;
  return all_accepted ? kExitOk : kExitFailure;
}

}  // namespace

int RunGrammar(std::span<const std::string> args) {
  auto parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) {
    return UsageError("grammar", Usage(), parsed.status().message());
  }
  if (parsed->help()) {
    std::cout << Usage();
    return kExitOk;
  }
  auto flags = ReadFlags(*parsed);
  if (!flags.ok()) {
    return UsageError("grammar", Usage(), flags.status().message());
  }
  return RunGrammarCommand(*flags);
}

}  // namespace paceline::tools
