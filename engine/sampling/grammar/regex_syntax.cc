#include "engine/sampling/grammar/regex_syntax.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/sampling/grammar/regex.h"

namespace paceline::engine::grammar::regex_internal {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

}  // namespace

Ranges Normalize(Ranges in) {
  std::sort(in.begin(), in.end(),
            [](CodepointRange a, CodepointRange b) { return a.lo < b.lo; });
  Ranges merged;
  for (CodepointRange r : in) {
    if (r.lo > r.hi || r.lo > kMaxCodepoint) continue;
    r.hi = std::min(r.hi, kMaxCodepoint);
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  Ranges out;
  for (CodepointRange r : merged) {
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) out.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) out.push_back({kSurrogateHi + 1, r.hi});
  }
  return out;
}

Ranges Complement(Ranges in) {
  Ranges out;
  uint32_t next = 0;
  for (CodepointRange r : Normalize(std::move(in))) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return Normalize(std::move(out));
}

Node MakeNode(NodeKind kind) {
  Node node;
  node.kind = kind;
  return node;
}

namespace {

// ECMAScript's class escapes (without the i flag).
Ranges Digits() { return {{'0', '9'}}; }
Ranges WordChars() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
// WhiteSpace (tab, VT, FF, space, NBSP, ZWNBSP, category Zs) and
// LineTerminator (LF, CR, LS, PS).
Ranges Spaces() {
  return {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},
          {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
          {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
          {0xFEFF, 0xFEFF}};
}
Ranges LineTerminators() {
  return {{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}};
}

absl::Status SyntaxError(size_t at, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("regex: at byte %d: %s", at, what));
}

absl::Status Unsupported(size_t at, absl::string_view feature) {
  return absl::UnimplementedError(absl::StrFormat(
      "regex: at byte %d: %s is not supported (not a regular language or "
      "not implemented)",
      at, feature));
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiLetter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  Parser(absl::string_view pattern, int32_t max_repeat)
      : p_(pattern), max_repeat_(max_repeat) {}

  // The root's index into nodes().
  absl::StatusOr<int32_t> Parse();
  std::vector<Node>* nodes() { return &nodes_; }

 private:
  // A class atom or escape: one code point, or a set (\d, \w, ...).
  struct Atom {
    bool is_set = false;
    uint32_t cp = 0;
    Ranges set;
  };

  absl::StatusOr<int32_t> ParseDisjunction(int depth);
  absl::StatusOr<int32_t> ParseAlternative(int depth);
  absl::StatusOr<int32_t> ParseGroup(size_t open, int depth);
  absl::StatusOr<int32_t> ParseQuantifier(int32_t atom);
  absl::StatusOr<int32_t> ParseCount();
  absl::StatusOr<Ranges> ParseClass(size_t open);
  absl::StatusOr<Atom> ParseClassAtom();
  absl::StatusOr<Atom> ParseEscape(bool in_class);
  absl::StatusOr<uint32_t> ParseUnicodeEscape(size_t at);
  absl::StatusOr<uint32_t> ParseHex(int digits, size_t at);
  absl::StatusOr<uint32_t> NextCodepoint();

  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek() const { return AtEnd() ? '\0' : p_[pos_]; }
  bool Consume(char c) {
    if (Peek() != c || AtEnd()) return false;
    ++pos_;
    return true;
  }
  int32_t Add(Node node) {
    nodes_.push_back(std::move(node));
    return static_cast<int32_t>(nodes_.size() - 1);
  }
  int32_t AddClass(Ranges ranges) {
    Node node = MakeNode(NodeKind::kClass);
    node.ranges = Normalize(std::move(ranges));
    return Add(std::move(node));
  }

  const absl::string_view p_;
  const int32_t max_repeat_;
  size_t pos_ = 0;
  std::vector<Node> nodes_;
};

absl::StatusOr<int32_t> Parser::Parse() {
  if (p_.size() > static_cast<size_t>(kMaxRegexBytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("regex: the pattern is %d bytes; the limit is %d",
                        p_.size(), kMaxRegexBytes));
  }
  ASSIGN_OR_RETURN(int32_t root, ParseDisjunction(0));
  if (!AtEnd()) return SyntaxError(pos_, "unmatched ')'");
  return root;
}

absl::StatusOr<int32_t> Parser::ParseDisjunction(int depth) {
  std::vector<int32_t> alternatives;
  do {
    ASSIGN_OR_RETURN(int32_t alternative, ParseAlternative(depth));
    alternatives.push_back(alternative);
  } while (Consume('|'));
  if (alternatives.size() == 1) return alternatives[0];
  Node node = MakeNode(NodeKind::kAlt);
  node.children = std::move(alternatives);
  return Add(std::move(node));
}

absl::StatusOr<int32_t> Parser::ParseAlternative(int depth) {
  Node seq = MakeNode(NodeKind::kSeq);
  while (!AtEnd() && Peek() != '|' && Peek() != ')') {
    const size_t at = pos_;
    const char c = Peek();
    int32_t atom = -1;
    bool quantifiable = true;
    switch (c) {
      case '^':
      case '$':
        ++pos_;
        atom = Add(MakeNode(c == '^' ? NodeKind::kStart : NodeKind::kEnd));
        quantifiable = false;
        break;
      case '(': {
        ++pos_;
        ASSIGN_OR_RETURN(atom, ParseGroup(at, depth + 1));
        break;
      }
      case '[': {
        ++pos_;
        ASSIGN_OR_RETURN(Ranges ranges, ParseClass(at));
        atom = AddClass(std::move(ranges));
        break;
      }
      case '.':
        ++pos_;
        atom = AddClass(Complement(LineTerminators()));
        break;
      case '\\': {
        ++pos_;
        ASSIGN_OR_RETURN(Atom escaped, ParseEscape(/*in_class=*/false));
        atom = escaped.is_set ? AddClass(std::move(escaped.set))
                              : AddClass({{escaped.cp, escaped.cp}});
        break;
      }
      case '*':
      case '+':
      case '?':
      case '{':
        return SyntaxError(
            at, absl::StrFormat("nothing to repeat before '%c' (write \\%c "
                                "for the character itself)",
                                c, c));
      case '}':
      case ']':
        return SyntaxError(at, absl::StrFormat("lone '%c' (write \\%c for "
                                               "the character itself)",
                                               c, c));
      default: {
        ASSIGN_OR_RETURN(uint32_t cp, NextCodepoint());
        atom = AddClass({{cp, cp}});
        break;
      }
    }
    const char q = Peek();
    if (!AtEnd() && (q == '*' || q == '+' || q == '?' || q == '{')) {
      if (!quantifiable) {
        return SyntaxError(pos_, "an anchor cannot be repeated");
      }
      ASSIGN_OR_RETURN(atom, ParseQuantifier(atom));
    }
    seq.children.push_back(atom);
  }
  if (seq.children.size() == 1) return seq.children[0];
  return Add(std::move(seq));
}

absl::StatusOr<int32_t> Parser::ParseGroup(size_t open, int depth) {
  if (depth > kMaxRegexDepth) {
    return SyntaxError(
        open, absl::StrFormat("groups nested deeper than %d", kMaxRegexDepth));
  }
  if (Consume('?')) {
    const size_t at = pos_;
    const char c = Peek();
    if (Consume(':')) {
      // Non-capturing: nothing to record.
    } else if (c == '=') {
      return Unsupported(open, "lookahead (?=...)");
    } else if (c == '!') {
      return Unsupported(open, "negative lookahead (?!...)");
    } else if (Consume('<')) {
      if (Peek() == '=') return Unsupported(open, "lookbehind (?<=...)");
      if (Peek() == '!') {
        return Unsupported(open, "negative lookbehind (?<!...)");
      }
      // A group name: an identifier (its non-ASCII letters taken on trust).
      const size_t name = pos_;
      while (!AtEnd() && Peek() != '>') {
        const char n = Peek();
        const bool ok = IsAsciiLetter(n) || n == '_' || n == '$' ||
                        (IsDigit(n) && pos_ > name) ||
                        static_cast<uint8_t>(n) >= 0x80;
        if (!ok) break;
        ++pos_;
      }
      if (pos_ == name || !Consume('>')) {
        return SyntaxError(pos_, "expected a group name and '>' after '(?<'");
      }
    } else if (c == 'P') {
      return SyntaxError(at,
                         "(?P...) is Python syntax; ECMAScript names a group "
                         "(?<name>...)");
    } else if (c == 'i' || c == 'm' || c == 's' || c == 'x' || c == 'u' ||
               c == '-') {
      return Unsupported(open, "an inline modifier (?i) / (?i:...)");
    } else {
      return SyntaxError(at, "expected ':', '<', '=' or '!' after '(?'");
    }
  }
  ASSIGN_OR_RETURN(int32_t body, ParseDisjunction(depth));
  if (!Consume(')')) {
    return SyntaxError(pos_, absl::StrFormat("expected ')' to close the "
                                             "group opened at byte %d",
                                             open));
  }
  return body;
}

absl::StatusOr<int32_t> Parser::ParseQuantifier(int32_t atom) {
  const size_t at = pos_;
  int32_t min = 0;
  int32_t max = kUnbounded;
  if (Consume('*')) {
  } else if (Consume('+')) {
    min = 1;
  } else if (Consume('?')) {
    max = 1;
  } else {
    Consume('{');
    ASSIGN_OR_RETURN(min, ParseCount());
    max = min;
    if (Consume(',')) {
      max = kUnbounded;
      if (Peek() != '}') {
        ASSIGN_OR_RETURN(max, ParseCount());
      }
    }
    if (!Consume('}')) {
      return SyntaxError(pos_,
                         "expected '}' to end the quantifier {n}, {n,} or "
                         "{n,m} (write \\{ for the character itself)");
    }
    if (max != kUnbounded && max < min) {
      return SyntaxError(at, "numbers out of order in the {n,m} quantifier");
    }
  }
  Consume('?');  // lazy: the same language
  Node node = MakeNode(NodeKind::kRepeat);
  node.children = {atom};
  node.min = min;
  node.max = max;
  return Add(std::move(node));
}

absl::StatusOr<int32_t> Parser::ParseCount() {
  const size_t at = pos_;
  int64_t n = 0;
  while (!AtEnd() && IsDigit(Peek())) {
    n = std::min<int64_t>(n * 10 + (Peek() - '0'), int64_t{1} << 40);
    ++pos_;
  }
  if (pos_ == at) {
    return SyntaxError(at,
                       "expected a number in the quantifier {n}, {n,} or "
                       "{n,m} (write \\{ for the character itself)");
  }
  if (n > max_repeat_) {
    return SyntaxError(at,
                       absl::StrFormat("the repetition count %s exceeds "
                                       "the limit %d",
                                       p_.substr(at, pos_ - at), max_repeat_));
  }
  return static_cast<int32_t>(n);
}

absl::StatusOr<Ranges> Parser::ParseClass(size_t open) {
  const bool negate = Consume('^');
  Ranges ranges;
  while (true) {
    if (AtEnd()) {
      return SyntaxError(open, "expected ']' to close the class opened here");
    }
    if (Consume(']')) break;
    ASSIGN_OR_RETURN(Atom lo, ParseClassAtom());
    if (Peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
      const size_t dash = pos_++;
      ASSIGN_OR_RETURN(Atom hi, ParseClassAtom());
      if (lo.is_set || hi.is_set) {
        return SyntaxError(dash,
                           "a class escape (\\d, \\w, \\s ...) cannot "
                           "bound a range (write \\- for '-')");
      }
      if (lo.cp > hi.cp) {
        return SyntaxError(dash, "range out of order in the class");
      }
      ranges.push_back({lo.cp, hi.cp});
    } else if (lo.is_set) {
      ranges.insert(ranges.end(), lo.set.begin(), lo.set.end());
    } else {
      ranges.push_back({lo.cp, lo.cp});
    }
  }
  return negate ? Complement(std::move(ranges)) : Normalize(std::move(ranges));
}

absl::StatusOr<Parser::Atom> Parser::ParseClassAtom() {
  if (Consume('\\')) return ParseEscape(/*in_class=*/true);
  Atom atom;
  ASSIGN_OR_RETURN(atom.cp, NextCodepoint());
  return atom;
}

// After a '\'.
absl::StatusOr<Parser::Atom> Parser::ParseEscape(bool in_class) {
  const size_t at = pos_ - 1;
  if (AtEnd()) return SyntaxError(at, "the pattern ends with a lone '\\'");
  const char c = p_[pos_++];
  Atom atom;
  auto set = [&atom](Ranges ranges) {
    atom.is_set = true;
    atom.set = std::move(ranges);
    return atom;
  };
  auto code = [&atom](uint32_t cp) {
    atom.cp = cp;
    return atom;
  };
  switch (c) {
    case 't':
      return code('\t');
    case 'n':
      return code('\n');
    case 'v':
      return code('\v');
    case 'f':
      return code('\f');
    case 'r':
      return code('\r');
    case 'd':
      return set(Digits());
    case 'D':
      return set(Complement(Digits()));
    case 'w':
      return set(WordChars());
    case 'W':
      return set(Complement(WordChars()));
    case 's':
      return set(Spaces());
    case 'S':
      return set(Complement(Spaces()));
    case 'b':
      if (in_class) return code(0x08);
      return Unsupported(at, "a word boundary \\b");
    case 'B':
      if (in_class) return SyntaxError(at, "\\B inside a class");
      return Unsupported(at, "a non-word-boundary \\B");
    case '0':
      if (IsDigit(Peek())) {
        return SyntaxError(at, "an octal escape (\\0 followed by a digit)");
      }
      return code(0);
    case 'c': {
      const char letter = Peek();
      if (!IsAsciiLetter(letter)) {
        return SyntaxError(pos_, "expected a letter after \\c");
      }
      ++pos_;
      return code(static_cast<uint32_t>(letter) % 32);
    }
    case 'x': {
      ASSIGN_OR_RETURN(uint32_t cp, ParseHex(2, at));
      return code(cp);
    }
    case 'u': {
      ASSIGN_OR_RETURN(uint32_t cp, ParseUnicodeEscape(at));
      return code(cp);
    }
    case 'k':
      return Unsupported(at, "a backreference \\k<name>");
    case 'p':
    case 'P':
      return Unsupported(at, "a Unicode property escape \\p{...}");
    default:
      break;
  }
  if (IsDigit(c)) {
    if (in_class) {
      return SyntaxError(at, "an octal escape (a digit after '\\' in a class)");
    }
    return Unsupported(at, absl::StrFormat("a backreference \\%c", c));
  }
  if (IsAsciiLetter(c)) {
    return SyntaxError(at, absl::StrFormat("unknown escape \\%c", c));
  }
  // Any other character stands for itself (\. \* \/ \- \@ ...).
  --pos_;
  ASSIGN_OR_RETURN(uint32_t cp, NextCodepoint());
  return code(cp);
}

// After "\u": HHHH (a surrogate pair of them is one character) or {H...}.
absl::StatusOr<uint32_t> Parser::ParseUnicodeEscape(size_t at) {
  if (Consume('{')) {
    const size_t digits = pos_;
    uint32_t cp = 0;
    while (!AtEnd() && HexValue(Peek()) >= 0) {
      cp = cp * 16 + HexValue(Peek());
      if (cp > kMaxCodepoint) {
        return SyntaxError(at, "\\u{...} beyond U+10FFFF");
      }
      ++pos_;
    }
    if (pos_ == digits || !Consume('}')) {
      return SyntaxError(pos_, "expected hex digits and '}' in \\u{...}");
    }
    return cp;
  }
  ASSIGN_OR_RETURN(uint32_t cp, ParseHex(4, at));
  if (cp >= 0xD800 && cp <= 0xDBFF && p_.substr(pos_, 2) == "\\u" &&
      pos_ + 6 <= p_.size()) {
    uint32_t low = 0;
    bool hex = true;
    for (size_t i = pos_ + 2; i < pos_ + 6; ++i) {
      hex = hex && HexValue(p_[i]) >= 0;
      low = low * 16 + (hex ? HexValue(p_[i]) : 0);
    }
    if (hex && low >= 0xDC00 && low <= 0xDFFF) {
      pos_ += 6;
      return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
  }
  return cp;
}

absl::StatusOr<uint32_t> Parser::ParseHex(int digits, size_t at) {
  uint32_t value = 0;
  for (int i = 0; i < digits; ++i) {
    const int h = HexValue(Peek());
    if (AtEnd() || h < 0) {
      return SyntaxError(at, absl::StrFormat("expected %d hex digits after "
                                             "\\%c",
                                             digits, p_[at + 1]));
    }
    value = value * 16 + h;
    ++pos_;
  }
  return value;
}

// Decodes one UTF-8 character (strictly: no overlong forms, surrogates or
// values past U+10FFFF).
absl::StatusOr<uint32_t> Parser::NextCodepoint() {
  const size_t at = pos_;
  const uint8_t lead = static_cast<uint8_t>(p_[pos_++]);
  if (lead < 0x80) return lead;
  int extra = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    extra = 1, cp = lead & 0x1F, min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    extra = 2, cp = lead & 0x0F, min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    extra = 3, cp = lead & 0x07, min = 0x10000;
  } else {
    return SyntaxError(at, "invalid UTF-8");
  }
  for (int i = 0; i < extra; ++i) {
    const uint8_t b = static_cast<uint8_t>(Peek());
    if (AtEnd() || (b & 0xC0) != 0x80) {
      return SyntaxError(at, "invalid UTF-8");
    }
    cp = (cp << 6) | (b & 0x3F);
    ++pos_;
  }
  if (cp < min || cp > kMaxCodepoint ||
      (cp >= kSurrogateLo && cp <= kSurrogateHi)) {
    return SyntaxError(at, "invalid UTF-8");
  }
  return cp;
}

}  // namespace

absl::StatusOr<Syntax> ParseRegex(absl::string_view pattern,
                                  int32_t max_repeat) {
  Parser parser(pattern, max_repeat);
  Syntax syntax;
  ASSIGN_OR_RETURN(syntax.root, parser.Parse());
  syntax.nodes = std::move(*parser.nodes());
  return syntax;
}

}  // namespace paceline::engine::grammar::regex_internal
