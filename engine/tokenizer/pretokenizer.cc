#include "engine/tokenizer/pretokenizer.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::engine {
namespace {

using Stage = PreTokenizer::Stage;

struct Variant {
  std::vector<absl::string_view> names;
  std::vector<Stage> stages;
  bool ignore_merges;
  bool normalize_nfc;
};

const std::vector<Variant>& Variants() {
  static const std::vector<Variant>* variants = new std::vector<Variant>{
      {{"default", ""},
       {Stage::kPunctDefault, Stage::kGpt2, Stage::kNumberRun,
        Stage::kAsciiDigits3},
       false,
       false},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de",
        "gigachat", "jina-v2-es", "jina-v2-de"},
       {Stage::kGpt2},
       false,
       false},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
        "minerva-7b"},
       {Stage::kNumber, Stage::kGpt2},
       false,
       false},
      {{"falcon"},
       {Stage::kPunctFalcon, Stage::kGpt2, Stage::kAsciiDigits3},
       false,
       false},
      {{"deepseek-coder"},
       {Stage::kNewline, Stage::kSpaceLetters, Stage::kSpacePunct, Stage::kCjk,
        Stage::kNumber},
       false,
       false},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3"},
       {Stage::kLlama3},
       true,
       false},
      {{"dbrx", "smaug-bpe"}, {Stage::kLlama3}, false, false},
      {{"qwen2", "deepseek-r1-qwen"}, {Stage::kQwen2}, false, true},
      {{"stablelm2", "megrez"}, {Stage::kQwen2}, false, false},
      {{"gpt-4o"}, {Stage::kGpt4o}, false, false},
      {{"deepseek-v3"},
       {Stage::kNumber3, Stage::kCjkKana, Stage::kDeepseekV3},
       false,
       false},
  };
  return *variants;
}

constexpr uint32_t kOutOfRange = 0xFFFFFFFF;

// One piece of the text being split further: codepoints [begin, end).
// Positions outside it read as kOutOfRange with empty flags, which is how
// llama.cpp's matchers see the edges of a piece.
class Piece {
 public:
  Piece(absl::Span<const uint32_t> cpts, absl::Span<const CodepointFlags> flags,
        size_t begin, size_t end, std::vector<size_t>* out)
      : cpts_(cpts),
        flags_(flags),
        begin_(begin),
        end_(end),
        prev_end_(begin),
        out_(out) {}

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  bool in(size_t pos) const { return pos >= begin_ && pos < end_; }
  uint32_t cpt(size_t pos) const { return in(pos) ? cpts_[pos] : kOutOfRange; }
  CodepointFlags flags(size_t pos) const {
    return in(pos) ? flags_[pos] : CodepointFlags{};
  }

  // Ends the current output piece at `end` (nothing when it would be empty)
  // and returns its length.
  size_t Emit(size_t end) {
    const size_t len = end - prev_end_;
    if (len > 0) out_->push_back(len);
    prev_end_ = end;
    return len;
  }

 private:
  absl::Span<const uint32_t> cpts_;
  absl::Span<const CodepointFlags> flags_;
  size_t begin_;
  size_t end_;
  size_t prev_end_;
  std::vector<size_t>* out_;
};

bool IsWordClassBreak(CodepointFlags f) {
  return f.is_whitespace() || f.is_letter() || f.is_number();
}

// `cpt` lowercased for the ASCII letters only; exact for the contraction
// letters (tools/gen_unicode_data.py checks no other codepoint lowercases to
// one of them).
uint32_t AsciiLower(uint32_t cpt) {
  return (cpt >= 'A' && cpt <= 'Z') ? cpt + ('a' - 'A') : cpt;
}

// 's 't 're 've 'm 'll 'd at `pos`: the match length, or 0.
size_t MatchContraction(const Piece& p, size_t pos, bool ignore_case) {
  if (p.cpt(pos) != '\'' || !p.in(pos + 1)) return 0;
  auto lower = [&](size_t i) {
    return ignore_case ? AsciiLower(p.cpt(i)) : p.cpt(i);
  };
  const uint32_t c1 = lower(pos + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (!p.in(pos + 2)) return 0;
  const uint32_t c2 = lower(pos + 2);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
      (c1 == 'l' && c2 == 'l')) {
    return 3;
  }
  return 0;
}

// Counts the whitespace run at `pos`; `last_newline_end` gets the position
// after its last \r or \n (0 when there is none).
size_t WhitespaceRun(const Piece& p, size_t pos, size_t* last_newline_end) {
  size_t n = 0;
  *last_newline_end = 0;
  while (p.flags(pos + n).is_whitespace()) {
    const uint32_t c = p.cpt(pos + n);
    if (c == '\r' || c == '\n') *last_newline_end = pos + n + 1;
    ++n;
  }
  return n;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void SplitGpt2(Piece& p) {
  for (size_t pos = p.begin(); pos < p.end();) {
    const uint32_t c = p.cpt(pos);
    if (const size_t n = MatchContraction(p, pos, false); n > 0) {
      pos += p.Emit(pos + n);
      continue;
    }
    // The optional leading space of the next three alternatives.
    const size_t skip = c == ' ' ? 1 : 0;
    const CodepointFlags f = p.flags(pos + skip);
    if (f.is_letter() || f.is_number()) {
      const bool letter = f.is_letter();
      pos += skip;
      while (letter ? p.flags(pos).is_letter() : p.flags(pos).is_number()) {
        ++pos;
      }
      p.Emit(pos);
      continue;
    }
    if (!IsWordClassBreak(f) && !f.none()) {
      pos += skip;
      while (!IsWordClassBreak(p.flags(pos)) && !p.flags(pos).none()) ++pos;
      p.Emit(pos);
      continue;
    }
    size_t unused;
    const size_t ws = WhitespaceRun(p, pos, &unused);
    if (ws > 1 && p.in(pos + ws)) {
      pos += ws - 1;  // \s+(?!\S): leave the last space to the next word
    } else if (ws > 0) {
      pos += ws;
    } else {
      ++pos;  // matches nothing: a piece of its own
    }
    p.Emit(pos);
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
// | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void SplitLlama3(Piece& p, size_t max_digits) {
  for (size_t pos = p.begin(); pos < p.end();) {
    const uint32_t c = p.cpt(pos);
    const CodepointFlags f = p.flags(pos);
    if (const size_t n = MatchContraction(p, pos, true); n > 0) {
      pos += p.Emit(pos + n);
      continue;
    }
    if (c != '\r' && c != '\n' && !f.is_number() &&
        (f.is_letter() || p.flags(pos + 1).is_letter())) {
      ++pos;  // a letter, or the one optional non-letter before letters
      while (p.flags(pos).is_letter()) ++pos;
      p.Emit(pos);
      continue;
    }
    if (f.is_number()) {
      size_t run_start = pos;
      while (p.flags(pos).is_number()) {
        if (++pos - run_start >= max_digits) {
          p.Emit(pos);
          run_start = pos;
        }
      }
      p.Emit(pos);
      continue;
    }
    // llama.cpp tests the class on the char after an optional space but the
    // "is a codepoint" condition on the current char; a lone trailing space
    // therefore lands here, which the regex would also split off alone.
    const size_t skip = c == ' ' ? 1 : 0;
    CodepointFlags f2 = p.flags(pos + skip);
    if (!IsWordClassBreak(f2) && !f.none()) {
      pos += skip;
      while (!IsWordClassBreak(f2) && !f2.none()) f2 = p.flags(++pos);
      while (p.cpt(pos) == '\r' || p.cpt(pos) == '\n') ++pos;
      p.Emit(pos);
      continue;
    }
    size_t last_newline_end;
    const size_t ws = WhitespaceRun(p, pos, &last_newline_end);
    if (last_newline_end > 0) {
      pos = last_newline_end;  // \s*[\r\n]+
    } else if (ws > 1 && p.in(pos + ws)) {
      pos += ws - 1;  // \s+(?!\S)
    } else if (ws > 0) {
      pos += ws;
    } else {
      ++pos;
    }
    p.Emit(pos);
  }
}

bool IsPunctOrListed(uint32_t c, CodepointFlags f, absl::string_view listed) {
  return f.is_punctuation() || (c < 128 && listed.find(static_cast<char>(c)) !=
                                               absl::string_view::npos);
}

bool IsAsciiDigit(uint32_t c) { return c >= '0' && c <= '9'; }

bool IsCjk(uint32_t c, CodepointFlags f) {
  // [一-龥ࠀ-一가-퟿]: U+4E00..U+9FA5, U+0800..U+4E00, U+AC00..U+D7FF.
  // llama.cpp turns non-ASCII whitespace (U+3000, U+2000.. inside the range)
  // into \v before matching, so those never match.
  return ((c >= 0x0800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF)) &&
         !f.is_whitespace();
}

// The end of the run of codepoints from `pos` that satisfy `pred`.
template <typename Pred>
size_t RunEnd(const Piece& p, size_t pos, Pred pred) {
  while (p.in(pos) && pred(p, pos)) ++pos;
  return pos;
}

// o200k's letter classes: U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and
// W = [\p{Ll}\p{Lm}\p{Lo}\p{M}].
bool IsCasedUpper(const Piece& p, size_t pos) {
  const CodepointFlags f = p.flags(pos);
  return f.is_mark() ||
         (f.is_letter() && GetLetterCase(p.cpt(pos)) != LetterCase::kLower);
}

bool IsCasedLower(const Piece& p, size_t pos) {
  const CodepointFlags f = p.flags(pos);
  return f.is_mark() ||
         (f.is_letter() && GetLetterCase(p.cpt(pos)) != LetterCase::kUpper);
}

// U*W+ from `start` as a backtracking regex takes it: the longest U run,
// given back one codepoint at a time until a W can follow. The match's end,
// or 0 for none.
size_t UpperThenLowerEnd(const Piece& p, size_t start) {
  const size_t upper_end = RunEnd(p, start, IsCasedUpper);
  for (size_t k = upper_end + 1; k-- > start;) {
    if (IsCasedLower(p, k)) return RunEnd(p, k, IsCasedLower);
  }
  return 0;
}

// U+W* from `start`: the match's end, or 0 for none.
size_t UpperRunEnd(const Piece& p, size_t start) {
  const size_t upper_end = RunEnd(p, start, IsCasedUpper);
  return upper_end == start ? 0 : RunEnd(p, upper_end, IsCasedLower);
}

// [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C? (C: a contraction),
// trying the optional lead codepoint first in each alternative.
size_t MatchCasedWord(const Piece& p, size_t pos) {
  const uint32_t c = p.cpt(pos);
  const CodepointFlags f = p.flags(pos);
  const bool lead =
      c != '\r' && c != '\n' && !f.none() && !f.is_letter() && !f.is_number();
  for (auto word_end : {UpperThenLowerEnd, UpperRunEnd}) {
    size_t end = lead ? word_end(p, pos + 1) : 0;
    if (end == 0) end = word_end(p, pos);
    if (end != 0) return end - pos + MatchContraction(p, end, true);
  }
  return 0;
}

// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
size_t MatchMarkedWord(const Piece& p, size_t pos) {
  const auto letter_or_mark = [](const Piece& q, size_t i) {
    return q.flags(i).is_letter() || q.flags(i).is_mark();
  };
  const uint32_t c = p.cpt(pos);
  const CodepointFlags f = p.flags(pos);
  if (c != '\r' && c != '\n' && !f.none() && !f.is_letter() &&
      !f.is_punctuation() && !f.is_symbol()) {
    const size_t end = RunEnd(p, pos + 1, letter_or_mark);
    if (end > pos + 1) return end - pos;
  }
  return RunEnd(p, pos, letter_or_mark) - pos;
}

bool IsAsciiLetter(uint32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// [!-/:-@[-`{-~][A-Za-z]+: one ASCII punctuation or symbol, then letters.
size_t MatchAsciiPunctWord(const Piece& p, size_t pos) {
  const uint32_t c = p.cpt(pos);
  if (c >= 128 || IsAsciiLetter(c) || IsAsciiDigit(c) || c <= ' ' ||
      c == 0x7F || !IsAsciiLetter(p.cpt(pos + 1))) {
    return 0;
  }
  size_t end = pos + 1;
  while (IsAsciiLetter(p.cpt(end))) ++end;
  return end - pos;
}

// ` ?X+` followed by `tail`*, X the codepoints `in_class` accepts and
// `tail` "\r\n" or "\r\n/".
template <typename Pred>
size_t MatchSymbolRun(const Piece& p, size_t pos, Pred in_class,
                      bool slash_in_tail) {
  const size_t start = pos + (p.cpt(pos) == ' ' ? 1 : 0);
  size_t end = start;
  while (p.in(end) && in_class(p.flags(end))) ++end;
  if (end == start) return 0;
  const auto in_tail = [&](uint32_t c) {
    return c == '\r' || c == '\n' || (slash_in_tail && c == '/');
  };
  while (in_tail(p.cpt(end))) ++end;
  return end - pos;
}

// \s*[\r\n]+|\s+(?!\S)|\s+
size_t MatchSpaces(const Piece& p, size_t pos) {
  size_t last_newline_end;
  const size_t ws = WhitespaceRun(p, pos, &last_newline_end);
  if (last_newline_end > 0) return last_newline_end - pos;
  return (ws > 1 && p.in(pos + ws)) ? ws - 1 : ws;
}

// \p{N}{1,3}
size_t MatchNumber3(const Piece& p, size_t pos) {
  size_t n = 0;
  while (n < 3 && p.flags(pos + n).is_number()) ++n;
  return n;
}

// The o200k pattern (pretokenizer.h): every codepoint matches something.
size_t MatchO200k(const Piece& p, size_t pos) {
  if (const size_t n = MatchCasedWord(p, pos); n > 0) return n;
  if (const size_t n = MatchNumber3(p, pos); n > 0) return n;
  const auto symbol = [](CodepointFlags f) {
    return !IsWordClassBreak(f) && !f.none();
  };
  if (const size_t n = MatchSymbolRun(p, pos, symbol, true); n > 0) return n;
  return MatchSpaces(p, pos);
}

// DeepSeek V3's last regex (pretokenizer.h); digits and other codepoints
// outside its classes stay in the gaps.
size_t MatchDeepseekV3(const Piece& p, size_t pos) {
  if (const size_t n = MatchAsciiPunctWord(p, pos); n > 0) return n;
  if (const size_t n = MatchMarkedWord(p, pos); n > 0) return n;
  const auto punct_or_symbol = [](CodepointFlags f) {
    return f.is_punctuation() || f.is_symbol();
  };
  if (const size_t n = MatchSymbolRun(p, pos, punct_or_symbol, false); n > 0) {
    return n;
  }
  return MatchSpaces(p, pos);
}

bool IsCjkKana(uint32_t c) {
  // [一-龥぀-ゟ゠-ヿ]: CJK ideographs to U+9FA5, hiragana, katakana.
  return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
}

// The length of the match of a single-regex stage at `pos`, 0 for none.
size_t MatchAt(Stage stage, const Piece& p, size_t pos) {
  auto run = [&](size_t from, auto pred) {
    size_t i = from;
    while (p.in(i) && pred(p.cpt(i), p.flags(i))) ++i;
    return i - pos;
  };
  auto optional_space_then_run = [&](auto pred) -> size_t {
    if (p.flags(pos).is_whitespace() && p.in(pos + 1) &&
        pred(p.cpt(pos + 1), p.flags(pos + 1))) {
      return run(pos + 1, pred);
    }
    return pred(p.cpt(pos), p.flags(pos)) ? run(pos, pred) : 0;
  };
  const auto letter = [](uint32_t, CodepointFlags f) { return f.is_letter(); };
  const auto punct = [](uint32_t, CodepointFlags f) {
    return f.is_punctuation();
  };
  const auto number = [](uint32_t, CodepointFlags f) { return f.is_number(); };
  switch (stage) {
    case Stage::kPunctDefault:
      return run(pos, [](uint32_t c, CodepointFlags f) {
        return IsPunctOrListed(c, f, "$+<=>^~|");
      });
    case Stage::kPunctFalcon:
      return run(pos, [](uint32_t c, CodepointFlags f) {
        return IsPunctOrListed(c, f, "$+<=>^~|`");
      });
    case Stage::kNumber:
      return p.flags(pos).is_number() ? 1 : 0;
    case Stage::kNumberRun:
      return run(pos, number);
    case Stage::kAsciiDigits3:
      for (size_t i = 0; i < 3; ++i) {
        if (!IsAsciiDigit(p.cpt(pos + i))) return 0;
      }
      return 3;
    case Stage::kNewline:
      return (p.cpt(pos) == '\r' || p.cpt(pos) == '\n') ? 1 : 0;
    case Stage::kSpaceLetters:
      return optional_space_then_run(letter);
    case Stage::kSpacePunct:
      return optional_space_then_run(punct);
    case Stage::kCjk:
      return run(pos, IsCjk);
    case Stage::kGpt4o:
      return MatchO200k(p, pos);
    case Stage::kNumber3:
      return MatchNumber3(p, pos);
    case Stage::kCjkKana:
      return run(pos, [](uint32_t c, CodepointFlags) { return IsCjkKana(c); });
    case Stage::kDeepseekV3:
      return MatchDeepseekV3(p, pos);
    case Stage::kGpt2:
    case Stage::kLlama3:
    case Stage::kQwen2:
      break;  // not single-regex matchers
  }
  return 0;
}

// std::regex_iterator semantics: leftmost matches, and each run of
// unmatched codepoints between them becomes one piece.
void SplitByMatches(Stage stage, Piece& p) {
  size_t gap_start = p.begin();
  size_t pos = p.begin();
  while (pos < p.end()) {
    const size_t len = MatchAt(stage, p, pos);
    if (len == 0) {
      ++pos;
      continue;
    }
    if (pos > gap_start) p.Emit(pos);
    pos += len;
    p.Emit(pos);
    gap_start = pos;
  }
  p.Emit(p.end());
}

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::Create(absl::string_view pre) {
  for (const Variant& v : Variants()) {
    for (absl::string_view name : v.names) {
      if (name == pre) {
        return PreTokenizer(std::string(pre), v.stages, v.ignore_merges,
                            v.normalize_nfc);
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer.ggml.pre: unsupported pre-tokenizer '",
                   absl::string_view(pre.data(), pre.size()), "'"));
}

PreTokenizer PreTokenizer::FromStages(std::string name,
                                      std::vector<Stage> stages) {
  return PreTokenizer(std::move(name), std::move(stages), false, false);
}

std::vector<size_t> PreTokenizer::SplitCodepoints(
    absl::Span<const uint32_t> cpts) const {
  std::vector<CodepointFlags> flags(cpts.size());
  for (size_t i = 0; i < cpts.size(); ++i)
    flags[i] = GetCodepointFlags(cpts[i]);

  std::vector<size_t> lengths;
  if (!cpts.empty()) lengths.push_back(cpts.size());
  std::vector<size_t> next;
  for (Stage stage : stages_) {
    next.clear();
    next.reserve(lengths.size() * 2);
    size_t begin = 0;
    for (size_t len : lengths) {
      Piece piece(cpts, flags, begin, begin + len, &next);
      switch (stage) {
        case Stage::kGpt2:
          SplitGpt2(piece);
          break;
        case Stage::kLlama3:
          SplitLlama3(piece, 3);
          break;
        case Stage::kQwen2:
          SplitLlama3(piece, 1);
          break;
        default:
          SplitByMatches(stage, piece);
          break;
      }
      begin += len;
    }
    lengths.swap(next);
  }
  return lengths;
}

std::vector<std::string> PreTokenizer::Split(absl::string_view text) const {
  const std::vector<uint32_t> cpts = DecodeUtf8Lenient(text);
  std::vector<std::string> pieces;
  size_t begin = 0;
  for (size_t len : SplitCodepoints(cpts)) {
    std::string& piece = pieces.emplace_back();
    for (size_t i = begin; i < begin + len; ++i) AppendUtf8(cpts[i], &piece);
    begin += len;
  }
  return pieces;
}

}  // namespace paceline::engine
