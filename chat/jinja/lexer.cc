#include "chat/jinja/lexer.h"

#include <cctype>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "chat/jinja/value.h"
#include "engine/tokenizer/unicode.h"

namespace paceline::chat::jinja {

absl::Status SyntaxError(int line, int column, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "chat template: line ", line, ", column ", column, ": ", what));
}

namespace {

std::string NormalizeNewlines(absl::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's str.rstrip() (Unicode whitespace).
size_t RstripEnd(absl::string_view text) {
  std::vector<uint32_t> cps = Codepoints(text);
  size_t end = text.size();
  for (size_t i = cps.size(); i > 0 && IsPySpace(cps[i - 1]); --i) {
    std::string enc;
    engine::AppendUtf8(cps[i - 1], &enc);
    end -= enc.size();
  }
  return end;
}

// Bytes of Python `\s*` at text[pos..].
size_t SpanSpaces(absl::string_view text, size_t pos) {
  size_t p = pos;
  while (p < text.size()) {
    engine::Utf8Scan scan = engine::ScanUtf8(text.substr(p));
    if (scan.kind != engine::Utf8Scan::kValid || !IsPySpace(scan.codepoint))
      break;
    p += scan.length;
  }
  return p - pos;
}

bool AllSpaces(absl::string_view text) {
  return !text.empty() && SpanSpaces(text, 0) == text.size();
}

class Lexer {
 public:
  explicit Lexer(absl::string_view source) : src_(NormalizeNewlines(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      absl::Status s = RootStep();
      if (!s.ok()) return s;
    }
    Push(Tok::kEof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  // Line and column (in codepoints) of `offset`. Tokens come in source
  // order, so the column is counted on from the previous token's.
  void LineCol(size_t offset, int* line, int* column) const {
    size_t lo = 0, hi = line_starts_.size();
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      (line_starts_[mid] <= offset ? lo : hi) = mid;
    }
    *line = static_cast<int>(lo + 1);
    size_t from = line_starts_[lo];
    size_t col = 1;
    if (cached_line_ == lo && cached_offset_ <= offset) {
      from = cached_offset_;
      col = cached_column_;
    }
    col += CodepointCount(absl::string_view(src_).substr(from, offset - from));
    cached_line_ = lo;
    cached_offset_ = offset;
    cached_column_ = col;
    *column = static_cast<int>(col);
  }

  absl::Status Error(size_t offset, absl::string_view what) const {
    int line, column;
    LineCol(offset, &line, &column);
    return SyntaxError(line, column, what);
  }

  Token& Push(Tok type, std::string text, size_t offset) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    LineCol(offset, &t.line, &t.column);
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  // The next tag start at or after `from`, or npos.
  size_t FindTag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos;
         p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() &&
          (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
        return p;
      }
    }
    return std::string::npos;
  }

  char SignAt(size_t p) const {
    return p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
  }

  // Applies `-` stripping or lstrip_blocks to the text before a tag.
  void EmitText(size_t begin, size_t end, char sign, bool is_variable) {
    absl::string_view text = absl::string_view(src_).substr(begin, end - begin);
    if (sign == '-') {
      text = text.substr(0, RstripEnd(text));
    } else if (sign != '+' && !is_variable) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == absl::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && AllSpaces(text.substr(l_pos))) {
        text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) Push(Tok::kText, std::string(text), begin);
  }

  // Matches `{%[-+]?\s*NAME\s*(-%}\s*|%})` (no trim) at p; the end or npos.
  size_t MatchRawTag(size_t p, absl::string_view name, bool trim) const {
    size_t q = p + 2;
    if (SignAt(q)) ++q;
    q += SpanSpaces(src_, q);
    if (absl::string_view(src_).substr(q, name.size()) != name) {
      return std::string::npos;
    }
    q += name.size();
    q += SpanSpaces(src_, q);
    return MatchBlockEnd(q, trim);
  }

  // `+%}` | `-%}\s*` | `%}\n?` (trim) at q; the end or npos.
  size_t MatchBlockEnd(size_t q, bool trim) const {
    absl::string_view rest = absl::string_view(src_).substr(q);
    if (rest.substr(0, 3) == "+%}") return q + 3;
    if (rest.substr(0, 3) == "-%}") return q + 3 + SpanSpaces(src_, q + 3);
    if (rest.substr(0, 2) == "%}") {
      q += 2;
      if (trim && q < src_.size() && src_[q] == '\n') ++q;
      return q;
    }
    return std::string::npos;
  }

  absl::Status RootStep() {
    size_t tag = FindTag(pos_);
    if (tag == std::string::npos) {
      Push(Tok::kText, src_.substr(pos_), pos_);
      pos_ = src_.size();
      return absl::OkStatus();
    }
    char kind = src_[tag + 1];
    char sign = SignAt(tag + 2);
    if (kind == '%') {
      size_t raw_end = MatchRawTag(tag, "raw", /*trim=*/false);
      if (raw_end != std::string::npos) {
        EmitText(pos_, tag, sign, false);
        return Raw(tag, raw_end);
      }
    }
    EmitText(pos_, tag, sign, kind == '{');
    size_t body = tag + 2 + (sign ? 1 : 0);
    if (kind == '#') return Comment(tag, body);
    return Tag(kind, tag, body);
  }

  absl::Status Raw(size_t tag, size_t body) {
    for (size_t p = src_.find("{%", body); p != std::string::npos;
         p = src_.find("{%", p + 1)) {
      size_t end = MatchRawTag(p, "endraw", /*trim=*/true);
      if (end == std::string::npos) continue;
      line_starting_ = src_[body - 1] == '\n';
      EmitText(body, p, SignAt(p + 2), false);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return absl::OkStatus();
    }
    return Error(tag, "missing end of raw directive");
  }

  absl::Status Comment(size_t tag, size_t body) {
    for (size_t q = src_.find("#}", body); q != std::string::npos;
         q = src_.find("#}", q + 1)) {
      size_t end = q + 2;
      char before = q > body ? src_[q - 1] : 0;
      if (before == '-') {
        end += SpanSpaces(src_, end);
      } else if (before != '+' && end < src_.size() && src_[end] == '\n') {
        ++end;
      }
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return absl::OkStatus();
    }
    return Error(tag, "missing end of comment tag");
  }

  absl::Status Tag(char kind, size_t tag, size_t body) {
    bool block = kind == '%';
    Push(block ? Tok::kBlockBegin : Tok::kVarBegin, "", tag);
    std::string balance;
    size_t p = body;
    while (true) {
      p += SpanSpaces(src_, p);
      if (p >= src_.size()) return Error(tag, "unexpected end of template");
      if (balance.empty()) {
        size_t end = block ? MatchBlockEnd(p, /*trim=*/true) : MatchVarEnd(p);
        if (end != std::string::npos) {
          Push(block ? Tok::kBlockEnd : Tok::kVarEnd, "", p);
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return absl::OkStatus();
        }
      }
      absl::Status s = InnerToken(&p, &balance);
      if (!s.ok()) return s;
    }
  }

  size_t MatchVarEnd(size_t q) const {
    absl::string_view rest = absl::string_view(src_).substr(q);
    if (rest.substr(0, 3) == "-}}") return q + 3 + SpanSpaces(src_, q + 3);
    if (rest.substr(0, 2) == "}}") return q + 2;
    return std::string::npos;
  }

  absl::Status InnerToken(size_t* p, std::string* balance);
  absl::Status Number(size_t* p);
  absl::Status String(size_t* p);
  absl::Status Operator(size_t* p, std::string* balance);

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  mutable size_t cached_line_ = static_cast<size_t>(-1);
  mutable size_t cached_offset_ = 0;
  mutable size_t cached_column_ = 1;
};

absl::Status Lexer::InnerToken(size_t* p, std::string* balance) {
  unsigned char c = src_[*p];
  if (std::isdigit(c)) return Number(p);
  if (std::isalpha(c) || c == '_') {
    size_t q = *p;
    while (
        q < src_.size() &&
        (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) {
      ++q;
    }
    Push(Tok::kName, src_.substr(*p, q - *p), *p);
    *p = q;
    return absl::OkStatus();
  }
  if (c == '\'' || c == '"') return String(p);
  return Operator(p, balance);
}

absl::Status Lexer::Operator(size_t* p, std::string* balance) {
  static constexpr absl::string_view kTwo[] = {
      "//", "**", "==", "!=", ">=", "<="};
  absl::string_view rest = absl::string_view(src_).substr(*p);
  for (absl::string_view op : kTwo) {
    if (rest.substr(0, 2) == op) {
      Push(Tok::kOp, std::string(op), *p);
      *p += 2;
      return absl::OkStatus();
    }
  }
  char c = src_[*p];
  if (absl::string_view("+-/*%~[](){}><=.:|,;").find(c) ==
      absl::string_view::npos) {
    return Error(*p, absl::StrCat("unexpected char '", std::string(1, c), "'"));
  }
  if (c == '(' || c == '[' || c == '{') {
    balance->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
  } else if (c == ')' || c == ']' || c == '}') {
    if (balance->empty() || balance->back() != c) {
      return Error(*p, absl::StrCat("unexpected '", std::string(1, c), "'"));
    }
    balance->pop_back();
  }
  Push(Tok::kOp, std::string(1, c), *p);
  ++*p;
  return absl::OkStatus();
}

// Digits with single `_` separators at *q; false when there are none.
bool ScanDigits(const std::string& s, size_t* q, int base) {
  auto is_digit = [&](char c) {
    if (base == 16) return std::isxdigit(static_cast<unsigned char>(c)) != 0;
    return c >= '0' && c < static_cast<char>('0' + base);
  };
  if (*q >= s.size() || !is_digit(s[*q])) return false;
  while (*q < s.size()) {
    if (is_digit(s[*q])) {
      ++*q;
    } else if (s[*q] == '_' && *q + 1 < s.size() && is_digit(s[*q + 1])) {
      ++*q;
    } else {
      break;
    }
  }
  return true;
}

std::string WithoutUnderscores(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (c != '_') out.push_back(c);
  }
  return out;
}

// The end of a float literal at p (jinja2's float_re), or npos.
size_t MatchFloat(const std::string& s, size_t p) {
  if (p > 0 && s[p - 1] == '.') return std::string::npos;
  size_t q = p;
  ScanDigits(s, &q, 10);
  size_t frac = q;
  bool has_frac = false;
  if (frac < s.size() && s[frac] == '.') {
    size_t f = frac + 1;
    if (ScanDigits(s, &f, 10)) {
      has_frac = true;
      q = f;
    }
  }
  if (q < s.size() && (s[q] == 'e' || s[q] == 'E')) {
    size_t e = q + 1;
    if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
    if (ScanDigits(s, &e, 10)) return e;
  }
  return has_frac ? q : std::string::npos;
}

}  // namespace

absl::Status Lexer::Number(size_t* p) {
  size_t start = *p;
  size_t fend = MatchFloat(src_, start);
  if (fend != std::string::npos) {
    std::string text = WithoutUnderscores(src_.substr(start, fend - start));
    Token& t = Push(Tok::kFloat, text, start);
    t.float_value = std::strtod(text.c_str(), nullptr);
    *p = fend;
    return absl::OkStatus();
  }
  int base = 10;
  size_t q = start;
  if (src_[q] == '0' && q + 1 < src_.size()) {
    char x = static_cast<char>(std::tolower(src_[q + 1]));
    base = x == 'b' ? 2 : x == 'o' ? 8 : x == 'x' ? 16 : 10;
  }
  if (base != 10) {
    q += 2;
    if (q < src_.size() && src_[q] == '_') ++q;
    if (!ScanDigits(src_, &q, base)) return Error(start, "invalid number");
  } else if (src_[q] == '0') {
    ++q;
    while (q + 1 < src_.size() && src_[q] == '_' && src_[q + 1] == '0') q += 2;
    while (q < src_.size() && src_[q] == '0') ++q;
  } else {
    ScanDigits(src_, &q, 10);
  }
  std::string digits = WithoutUnderscores(src_.substr(
      start + (base != 10 ? 2 : 0), q - start - (base != 10 ? 2 : 0)));
  uint64_t value = 0;
  for (char c : digits) {
    int d = std::isdigit(static_cast<unsigned char>(c))
                ? c - '0'
                : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
    if (value >
        (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) /
            base) {
      return Error(start, "integer literal too large");
    }
    value = value * base + d;
  }
  Token& t = Push(Tok::kInt, src_.substr(start, q - start), start);
  t.int_value = static_cast<int64_t>(value);
  *p = q;
  return absl::OkStatus();
}

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Decodes one escape after a backslash at body[*i] (the char after `\`);
// false for a malformed \x, \u or \U.
bool DecodeEscape(absl::string_view body, size_t* i, std::string* out) {
  if (*i >= body.size()) return false;
  char c = body[*i];
  static constexpr absl::string_view kSimple = "\\'\"abfnrtv";
  static constexpr absl::string_view kValues = "\\'\"\a\b\f\n\r\t\v";
  if (size_t k = kSimple.find(c); k != absl::string_view::npos) {
    out->push_back(kValues[k]);
    ++*i;
    return true;
  }
  if (c == '\n') {
    ++*i;
    return true;
  }
  if (c >= '0' && c <= '7') {
    uint32_t v = 0;
    for (int n = 0;
         n < 3 && *i < body.size() && body[*i] >= '0' && body[*i] <= '7';
         ++n, ++*i) {
      v = v * 8 + (body[*i] - '0');
    }
    engine::AppendUtf8(v, out);
    return true;
  }
  int width = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
  if (width == 0) {
    out->push_back('\\');
    return true;  // unknown escapes stay as written
  }
  uint32_t v = 0;
  for (int n = 1; n <= width; ++n) {
    if (*i + n >= body.size() || HexValue(body[*i + n]) < 0) return false;
    v = v * 16 + HexValue(body[*i + n]);
  }
  if (v > 0x10FFFF) return false;
  if (v >= 0xD800 && v <= 0xDFFF) v = engine::kReplacementCodepoint;
  engine::AppendUtf8(v, out);
  *i += width + 1;
  return true;
}

}  // namespace

absl::Status Lexer::String(size_t* p) {
  char quote = src_[*p];
  size_t q = *p + 1;
  while (q < src_.size() && src_[q] != quote) {
    q += src_[q] == '\\' ? 2 : 1;
  }
  if (q >= src_.size()) return Error(*p, "unterminated string");
  absl::string_view body = absl::string_view(src_).substr(*p + 1, q - *p - 1);
  std::string value;
  for (size_t i = 0; i < body.size();) {
    if (body[i] != '\\') {
      value.push_back(body[i++]);
      continue;
    }
    ++i;
    if (!DecodeEscape(body, &i, &value)) {
      return Error(*p, "malformed escape in string");
    }
  }
  Push(Tok::kString, std::move(value), *p);
  *p = q + 1;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Token>> Lex(absl::string_view source) {
  return Lexer(source).Run();
}

}  // namespace paceline::chat::jinja
