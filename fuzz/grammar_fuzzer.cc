// libFuzzer target for the grammar engine (structured output): schemas,
// patterns and grammars come from clients, so any bytes must build, compile
// and drive token masks without a crash, a hang or a mask that disagrees
// with the matcher.
//
// Input framing: byte 0 picks the front end (bits 0-1: JSON Schema, regex,
// GBNF, choice) and an option (bit 2: flexible whitespace for a schema,
// search mode for a pattern). The text runs from byte 1 to the first NUL
// (choices: one per line); the bytes after the NUL pick the tokens.
//
// Whatever compiles (under small limits, so a case stays fast) is walked
// for up to kSteps tokens over a fixed vocabulary of 338 tokens (every
// byte, JSON and number pieces, UTF-8 characters and fragments, a
// duplicate, an empty control token and an end-of-generation token). At
// each step:
//   the mask (GrammarMask::Fill) allows a token with bytes exactly when
//   pda.h, stepped byte by byte from the matcher's stacks, reads all of
//   them (and a copy of the Matcher accepts a sample of the allowed ones),
//   the single bytes exactly Matcher::NextBytes, EOS exactly where
//   CanFinish, the control token never, and something always (a live
//   configuration can complete);
//   Accept refuses a token the mask refused and leaves the state as it
//   was; a Clone fills the same mask;
//   an allowed token, picked by an input byte, is accepted.
// A walk that ends with EOS has a complete text: JSON for a schema, a
// match for a pattern (std::regex the reference, where it reads the
// pattern the same way), one of the choices for a choice.
// A step's checks are skipped where pda.h's limits (stack depth, number of
// stacks) cut the reading of some token: there the matcher may refuse what
// the tables allow.
//
// Replayed by ctest (grammar_fuzz_replay) over its seeds and regressions.

#include <algorithm>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/constraint.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/grammar_mask.h"
#include "engine/sampling/grammar/mask_tables.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/grammar/pda.h"
#include "engine/sampling/grammar/regex.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/sampling/row_sampling_math.h"

namespace {

namespace g = ::paceline::engine::grammar;
using ::paceline::engine::MaskAllows;
using ::paceline::engine::MaskWords;

constexpr int kSteps = 40;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "grammar_fuzzer invariant violated: %s\n", what);
    std::abort();
  }
}

// A refusal says what and why, with one of the codes the front ends and
// Compile give (grammar_cache.h: DeadlineExceeded past the time budget),
// never Internal or Unknown.
void CheckRefusal(const absl::Status& status) {
  Check(!status.message().empty(), "an error without a message");
  const absl::StatusCode code = status.code();
  if (code != absl::StatusCode::kInvalidArgument &&
      code != absl::StatusCode::kUnimplemented &&
      code != absl::StatusCode::kResourceExhausted &&
      code != absl::StatusCode::kDeadlineExceeded) {
    std::fprintf(stderr, "grammar_fuzzer: unexpected error: %s\n",
                 status.ToString().c_str());
    std::abort();
  }
}

// Every byte, then pieces a JSON or number grammar reads in one token,
// UTF-8 characters and fragments of them, a duplicate of "true", an empty
// control token and the end-of-generation token (last).
struct Vocab {
  std::shared_ptr<const g::TokenTrie> trie;
  int32_t control = -1;
  int32_t eos = -1;
};

const Vocab& TheVocab() {
  static const Vocab* vocab = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b)
      tokens.push_back(std::string(1, static_cast<char>(b)));
    for (const char* t :
         {"{\"",        "\":",      "\"}",     "\",",  "\",\"", "\":\"",
          "\": ",       ", ",       ": ",      "{}",   "[]",    "[{",
          "}]",         "},{",      "],",      "\"\"", "true",  "false",
          "null",       "tru",      "ue",      "fa",   "lse",   "nu",
          "ll",         "true",     "0",       "00",   "12",    "123",
          "1234567890", "-1",       "-0",      ".5",   "0.",    "1e",
          "e+",         "E-",       "\\\"",    "\\\\", "\\n",   "\\u",
          "\\u00",      "00e9",     "ab",      "abc",  "aaaa",  "name",
          "id",         "\"name\"", "\"id\":", "type", "  ",    "    ",
          "\n",         "\n  ",     " \"",     "::=",  "http",  "://",
          ".com",       "@",        "-"}) {
      tokens.push_back(t);
    }
    for (const char* t :
         {"\xC3\xA9", "\xC3", "\xA9", "\xA9\x41", "\xE2\x82\xAC", "\xE2\x82",
          "\x82\xAC", "\xAC\"", "\xF0\x9F\x98\x80", "\xF0\x9F", "\x98\x80",
          "\x9F\x98", "\xE4\xB8\xAD\xE6\x96\x87", "\xED\xA0\x80", "\xC0\xAF",
          "\xF4\x90\x80\x80", "\xEF\xBB\xBF"}) {
      tokens.push_back(t);
    }
    auto* v = new Vocab;
    v->control = static_cast<int32_t>(tokens.size());
    tokens.push_back("");
    v->eos = static_cast<int32_t>(tokens.size());
    tokens.push_back("");
    v->trie = g::TokenTrie::Create(std::move(tokens), {v->eos});
    return v;
  }();
  return *vocab;
}

absl::StatusOr<g::Grammar> BuildGrammar(uint8_t mode, absl::string_view text) {
  const bool option = (mode & 4) != 0;
  g::Constraint c;
  c.text = std::string(text);
  switch (mode & 3) {
    case 0:
      c.kind = g::Constraint::Kind::kJsonSchema;
      c.flexible_whitespace = option;
      break;
    case 1: {
      if (!option) {
        c.kind = g::Constraint::Kind::kRegex;
        break;
      }
      g::Grammar grammar;
      g::RegexOptions options;
      options.search = true;
      absl::StatusOr<g::ExprId> body = g::AddRegex(&grammar, text, options);
      if (!body.ok()) return body.status();
      const g::RuleId root = grammar.AddRule("root");
      grammar.SetRule(root, *body);
      grammar.set_root(root);
      return grammar;
    }
    case 2:
      c.kind = g::Constraint::Kind::kGbnf;
      break;
    default:
      c.kind = g::Constraint::Kind::kChoice;
      c.choices = absl::StrSplit(text, '\n');
      break;
  }
  return g::ConstraintGrammar(c);
}

// Sets in `reads` (a mask) every token below trie node `node` that
// `stacks` (the configuration at `node`) can read in full: pda.h stepped
// directly, one byte per trie node, independent of the mask tables.
// Returns false when a limit of pda.h cut a step (`reads` is incomplete).
bool ReadTokens(const g::CompiledGrammar& grammar, const g::TokenTrie& trie,
                int32_t node, const std::vector<g::Stack>& stacks,
                std::vector<uint32_t>* reads) {
  std::vector<g::Stack> next;
  for (uint32_t c = node + 1; c < trie.end(node); c = trie.end(c)) {
    if (!g::StepAll(grammar, stacks, trie.byte(c), &next)) return false;
    if (next.empty()) continue;
    for (int32_t id : trie.tokens(c)) (*reads)[id >> 5] |= 1u << (id & 31);
    if (!ReadTokens(grammar, trie, c, next, reads)) return false;
  }
  return true;
}

bool Allows(const std::vector<uint32_t>& mask, int32_t id) {
  return MaskAllows(mask.data(), id);
}

// Checks one step's mask against the matcher (word by word: the checks
// run on every step of every input). Returns false (checks skipped) when
// a limit of pda.h cut some token's reading.
bool CheckMask(const g::Matcher& matcher, const std::vector<uint32_t>& mask) {
  const Vocab& vocab = TheVocab();
  const g::TokenTrie& trie = *vocab.trie;
  std::vector<uint32_t> expected(mask.size(), 0);
  if (!ReadTokens(matcher.grammar(), trie, 0, matcher.stacks(), &expected)) {
    return false;
  }
  if (matcher.CanFinish()) {
    expected[vocab.eos >> 5] |= 1u << (vocab.eos & 31);
  }
  for (size_t w = 0; w < mask.size(); ++w) {
    if (mask[w] == expected[w]) continue;
    const int32_t id =
        static_cast<int32_t>(w * 32) + __builtin_ctz(mask[w] ^ expected[w]);
    std::fprintf(stderr,
                 "grammar_fuzzer: token %d (\"%s\"): mask %d, "
                 "grammar %d\n",
                 id, std::string(trie.bytes(id)).c_str(), Allows(mask, id),
                 Allows(expected, id));
    Check(id != vocab.eos, "EOS allowed differs from CanFinish");
    Check(id != vocab.control, "the mask allows a control token");
    Check(false, "the mask differs from what the grammar reads");
  }
  Check(std::any_of(mask.begin(), mask.end(), [](uint32_t w) { return w; }),
        "the mask allows nothing (a dead end)");
  const std::bitset<256> next = matcher.NextBytes();
  for (int w = 0; w < 8; ++w) {
    uint32_t bytes = 0;
    for (int b = 0; b < 32; ++b) bytes |= uint32_t{next[w * 32 + b]} << b;
    Check(bytes == mask[w], "NextBytes differs from the mask");
  }
  // The Matcher itself, on up to 16 allowed tokens spread over the
  // vocabulary (all of them would double the cost of a step).
  std::vector<int32_t> ids;
  for (size_t w = 0; w < mask.size(); ++w) {
    for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
      const int32_t id = static_cast<int32_t>(w * 32) + __builtin_ctz(bits);
      if (id != vocab.eos) ids.push_back(id);
    }
  }
  const size_t stride = ids.size() / 16 + 1;
  for (size_t i = 0; i < ids.size(); i += stride) {
    g::Matcher copy = matcher;
    Check(copy.AcceptBytes(trie.bytes(ids[i])),
          "Matcher::AcceptBytes refuses an allowed token");
  }
  return true;
}

// The id of the `pick`-th token (modulo their count) that the mask allows
// (`allowed`) or refuses; -1 when there is none.
int32_t PickToken(const std::vector<uint32_t>& mask, bool allowed,
                  uint8_t pick) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < TheVocab().trie->vocab_size(); ++id) {
    if (Allows(mask, id) == allowed) ids.push_back(id);
  }
  return ids.empty() ? -1 : ids[pick % ids.size()];
}

// Walks the mask; returns the text when the walk ended with EOS.
std::optional<std::string> Walk(
    std::shared_ptr<const g::CompiledGrammar> compiled,
    absl::string_view picks) {
  const Vocab& vocab = TheVocab();
  const int32_t words =
      static_cast<int32_t>(MaskWords(vocab.trie->vocab_size()));
  auto tables = std::make_shared<g::MaskTables>(
      std::move(compiled), vocab.trie,
      std::make_shared<g::SharedEntries>(/*budget_bytes=*/16 << 10));
  g::GrammarMask mask(tables);
  std::vector<uint32_t> allowed(words), again(words);
  std::string text;
  for (int step = 0; step < kSteps; ++step) {
    const uint8_t pick = picks.empty()
                             ? static_cast<uint8_t>(step * 37 + 11)
                             : static_cast<uint8_t>(picks[step % picks.size()]);
    mask.Fill(absl::MakeSpan(allowed));
    const bool checked = CheckMask(mask.matcher(), allowed);

    const int32_t refused = PickToken(allowed, false, pick ^ 0x5A);
    if (refused >= 0) {
      Check(!mask.Accept(refused).ok(), "Accept takes a refused token");
      mask.Fill(absl::MakeSpan(again));
      Check(again == allowed, "a refused Accept changed the mask");
    }
    if (step % 8 == 0) {
      std::unique_ptr<paceline::engine::TokenMask> clone = mask.Clone();
      clone->Fill(absl::MakeSpan(again));
      Check(again == allowed, "a Clone fills a different mask");
    }

    const int32_t token = PickToken(allowed, true, pick);
    if (token < 0) {
      // Nothing allowed: only where a limit cut the configuration.
      Check(!checked, "nothing allowed");
      return std::nullopt;
    }
    const bool accepted = mask.Accept(token).ok();
    if (!accepted) {
      Check(!checked, "Accept refuses an allowed token");
      return std::nullopt;
    }
    absl::StrAppend(&text, vocab.trie->bytes(token));
    if (token == vocab.eos) {
      Check(mask.ended(), "EOS accepted but the mask has not ended");
      mask.Fill(absl::MakeSpan(again));
      Check(std::all_of(again.begin(), again.end(),
                        [](uint32_t w) { return w == 0; }),
            "the mask allows tokens after EOS");
      Check(!mask.Accept('a').ok() && !mask.Accept(vocab.eos).ok(),
            "Accept takes a token after EOS");
      return text;
    }
  }
  return std::nullopt;
}

// RFC 8259's grammar, strictly (UTF-8 checked, numbers of any size: a
// parser that reads them as doubles refuses 1e400, JSON does not).
class JsonChecker {
 public:
  explicit JsonChecker(absl::string_view s) : s_(s) {}

  bool Valid() {
    Blanks();
    if (!Value(0)) return false;
    Blanks();
    return pos_ == s_.size();
  }

 private:
  bool Eat(char c) {
    if (pos_ >= s_.size() || s_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool Digit() {
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return false;
    ++pos_;
    return true;
  }
  void Blanks() {
    while (Eat(' ') || Eat('\t') || Eat('\n') || Eat('\r')) {
    }
  }
  bool Word(absl::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  bool Value(int depth) {
    if (depth > 1000 || pos_ >= s_.size()) return false;
    switch (s_[pos_]) {
      case '{':
      case '[': {
        const char close = s_[pos_++] == '{' ? '}' : ']';
        Blanks();
        if (Eat(close)) return true;
        do {
          Blanks();
          if (close == '}') {
            if (!String()) return false;
            Blanks();
            if (!Eat(':')) return false;
            Blanks();
          }
          if (!Value(depth + 1)) return false;
          Blanks();
        } while (Eat(','));
        return Eat(close);
      }
      case '"':
        return String();
      case 't':
        return Word("true");
      case 'f':
        return Word("false");
      case 'n':
        return Word("null");
      default:
        return Number();
    }
  }

  bool Number() {
    Eat('-');
    if (!Eat('0')) {
      if (!Digit()) return false;
      while (Digit()) {
      }
    }
    if (Eat('.')) {
      if (!Digit()) return false;
      while (Digit()) {
      }
    }
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      if (!Digit()) return false;
      while (Digit()) {
      }
    }
    return true;
  }

  bool String() {
    if (!Eat('"')) return false;
    while (pos_ < s_.size()) {
      const uint8_t c = static_cast<uint8_t>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        ++pos_;
        if (Eat('u')) {
          for (int i = 0; i < 4; ++i) {
            if (pos_ >= s_.size() || !absl::ascii_isxdigit(s_[pos_++])) {
              return false;
            }
          }
        } else if (!(Eat('"') || Eat('\\') || Eat('/') || Eat('b') ||
                     Eat('f') || Eat('n') || Eat('r') || Eat('t'))) {
          return false;
        }
        continue;
      }
      const int n = Utf8Length(s_.substr(pos_));
      if (n == 0) return false;
      pos_ += n;
    }
    return false;
  }

  // The length of the well-formed UTF-8 character at the start of `s`
  // (Unicode's table 3-7), or 0.
  static int Utf8Length(absl::string_view s) {
    const auto at = [&s](size_t i) {
      return i < s.size() ? static_cast<uint8_t>(s[i]) : 0;
    };
    const uint8_t b0 = at(0);
    const auto cont = [&at](size_t i, uint8_t lo = 0x80, uint8_t hi = 0xBF) {
      return at(i) >= lo && at(i) <= hi;
    };
    if (b0 < 0x80) return 1;
    if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
    if (b0 == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
    if (b0 == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    if (b0 >= 0xE1 && b0 <= 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (b0 == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (b0 == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    if (b0 >= 0xF1 && b0 <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    return 0;
  }

  const absl::string_view s_;
  size_t pos_ = 0;
};

// A complete text of a pattern matches it, by std::regex's ECMAScript
// reading where that is the same as the engine's: ASCII pattern and text,
// no escapes that differ (\u \x \c \0 \b) or that std::regex lacks
// (named groups), short enough for its backtracking.
void CheckRegexText(absl::string_view pattern, bool search,
                    const std::string& out) {
  const auto ascii = [](absl::string_view s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return static_cast<uint8_t>(c) < 0x80; });
  };
  if (pattern.size() > 64 || out.size() > 64 || !ascii(pattern) ||
      !ascii(out)) {
    return;
  }
  for (const char* differs : {"\\u", "\\x", "\\c", "\\0", "\\b", "(?<"}) {
    if (absl::StrContains(pattern, differs)) return;
  }
  bool match = false;
  try {
    const std::regex re(std::string(pattern), std::regex::ECMAScript);
    match = search ? std::regex_search(out, re) : std::regex_match(out, re);
  } catch (const std::regex_error&) {
    return;  // a pattern std::regex refuses, or too complex for it
  }
  if (!match) {
    std::fprintf(stderr, "grammar_fuzzer: text: %s\n",
                 absl::CEscape(out).c_str());
    Check(false, "a pattern's text does not match it (std::regex)");
  }
}

// A complete text of a JSON Schema is JSON; of a pattern, a match; of a
// choice, one of them.
void CheckText(uint8_t mode, absl::string_view input, const std::string& out) {
  if ((mode & 3) == 1) CheckRegexText(input, (mode & 4) != 0, out);
  if ((mode & 3) == 0 && !JsonChecker(out).Valid()) {
    std::fprintf(stderr, "grammar_fuzzer: text: %s\n",
                 absl::CEscape(out).c_str());
    Check(false, "a schema's text is not JSON");
  }
  if ((mode & 3) == 3) {
    const std::vector<absl::string_view> choices = absl::StrSplit(input, '\n');
    Check(std::find(choices.begin(), choices.end(), out) != choices.end(),
          "a choice's text is none of the choices");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const absl::string_view rest(reinterpret_cast<const char*>(data + 1),
                               size - 1);
  const size_t nul = rest.find('\0');
  const absl::string_view text = rest.substr(0, nul);
  const absl::string_view picks = nul == absl::string_view::npos
                                      ? absl::string_view()
                                      : rest.substr(nul + 1);

  absl::StatusOr<g::Grammar> grammar = BuildGrammar(mode, text);
  if (!grammar.ok()) {
    CheckRefusal(grammar.status());
    return 0;
  }
  Check(grammar->Validate().ok(), "a front end built an invalid grammar");
  g::CompileLimits limits;
  limits.max_nfa_states = 100'000;
  limits.max_dfa_states = 20'000;
  limits.time_budget = absl::Milliseconds(200);
  absl::StatusOr<std::shared_ptr<const g::CompiledGrammar>> compiled =
      g::Compile(*grammar, limits);
  if (!compiled.ok()) {
    CheckRefusal(compiled.status());
    return 0;
  }
  const std::optional<std::string> out = Walk(*std::move(compiled), picks);
  if (out.has_value()) CheckText(mode, text, *out);
  return 0;
}
