// JsonNumberRange (json_text.h): JSON numbers between decimal bounds, as a
// regular language built digit by digit. A value is split into its integer
// digits I (no leading zeros) and fraction digits F; a bound compares
// first on I (length, then digits), then on F padded with zeros.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/sampling/grammar/json_text.h"

namespace paceline::engine::grammar {
namespace {

// Integer digits past this many stand for "beyond any number written":
// a bound that large (e.g. 1.7976931348623157e308) limits nothing the
// grammar produces, which writes at most this many.
constexpr size_t kMaxIntDigits = 100;
constexpr int kMaxExponent = 400;

struct Decimal {
  bool negative = false;
  std::string int_digits = "0";  // canonical: no leading zeros
  std::string frac;              // no trailing zeros
  bool huge = false;             // |value| >= 10^kMaxIntDigits
};

bool AllZeros(const std::string& s) {
  return s.find_first_not_of('0') == std::string::npos;
}

absl::StatusOr<Decimal> ParseDecimal(const std::string& text) {
  Decimal d;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string mantissa;
  int point = -1;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (absl::ascii_isdigit(c)) {
      mantissa.push_back(c);
    } else if (c == '.' && point < 0) {
      point = static_cast<int>(mantissa.size());
    } else {
      break;
    }
  }
  int exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    if (!absl::SimpleAtoi(text.substr(i + 1), &exponent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' is not a number"));
    }
    i = text.size();
  }
  if (mantissa.empty() || i != text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a number"));
  }
  if (point < 0) point = static_cast<int>(mantissa.size());
  if (std::abs(exponent) > kMaxExponent) {
    if (exponent < 0 || AllZeros(mantissa)) return Decimal{};
    d.huge = true;
    return d;
  }
  const int at = point + exponent;
  std::string int_part;
  std::string frac;
  if (at <= 0) {
    frac = std::string(-at, '0') + mantissa;
  } else if (at >= static_cast<int>(mantissa.size())) {
    int_part = mantissa + std::string(at - mantissa.size(), '0');
  } else {
    int_part = mantissa.substr(0, at);
    frac = mantissa.substr(at);
  }
  int_part.erase(0, std::min(int_part.find_first_not_of('0'), int_part.size()));
  if (int_part.empty()) int_part = "0";
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  d.int_digits = int_part;
  d.frac = frac;
  d.huge = int_part.size() > kMaxIntDigits;
  if (int_part == "0" && frac.empty()) d.negative = false;
  return d;
}

// Canonical integer strings.
int CompareInt(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : a == b ? 0 : 1;
}

std::string Increment(std::string s) {
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    if (s[i] != '9') {
      ++s[i];
      return s;
    }
    s[i] = '0';
  }
  return "1" + s;
}

// s > 0.
std::string Decrement(std::string s) {
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    if (s[i] != '0') {
      --s[i];
      break;
    }
    s[i] = '9';
  }
  s.erase(0, std::min(s.find_first_not_of('0'), s.size() - 1));
  return s;
}

int CompareNonNegative(const Decimal& a, const Decimal& b) {
  const int c = CompareInt(a.int_digits, b.int_digits);
  if (c != 0) return c;
  return a.frac < b.frac ? -1 : a.frac == b.frac ? 0 : 1;
}

class Builder {
 public:
  explicit Builder(Grammar* g) : g_(g) {}

  ExprId Digits(char lo, char hi) {
    if (lo > hi) return g_->Nothing();
    return g_->Bytes({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
  }
  ExprId AnyDigits(int32_t min, int32_t max) {
    return g_->Repeat(Digits('0', '9'), min, max);
  }
  ExprId Lit(char c) { return g_->Byte(static_cast<uint8_t>(c)); }

  // Fixed-length digit strings >= s (`strict`: >).
  ExprId AtLeastFixed(const std::string& s, bool strict) {
    if (s.empty()) return strict ? g_->Nothing() : g_->Empty();
    const int32_t rest = static_cast<int32_t>(s.size()) - 1;
    return g_->Alt({g_->Seq({Lit(s[0]), AtLeastFixed(s.substr(1), strict)}),
                    g_->Seq({Digits(s[0] + 1, '9'), AnyDigits(rest, rest)})});
  }
  ExprId AtMostFixed(const std::string& s, bool strict) {
    if (s.empty()) return strict ? g_->Nothing() : g_->Empty();
    const int32_t rest = static_cast<int32_t>(s.size()) - 1;
    return g_->Alt({g_->Seq({Lit(s[0]), AtMostFixed(s.substr(1), strict)}),
                    g_->Seq({Digits('0', s[0] - 1), AnyDigits(rest, rest)})});
  }
  // Fixed-length strings in [a, b], a <= b, same length.
  ExprId BetweenFixed(const std::string& a, const std::string& b) {
    if (a.empty()) return g_->Empty();
    const int32_t rest = static_cast<int32_t>(a.size()) - 1;
    if (a[0] == b[0]) {
      return g_->Seq({Lit(a[0]), BetweenFixed(a.substr(1), b.substr(1))});
    }
    return g_->Alt(
        {g_->Seq({Lit(a[0]), AtLeastFixed(a.substr(1), false)}),
         g_->Seq({Digits(a[0] + 1, b[0] - 1), AnyDigits(rest, rest)}),
         g_->Seq({Lit(b[0]), AtMostFixed(b.substr(1), false)})});
  }

  // Canonical integers in [lo, hi] (hi null: no upper bound).
  ExprId IntRange(const std::string& lo, const std::string* hi) {
    if (hi != nullptr && CompareInt(lo, *hi) > 0) return g_->Nothing();
    const int32_t n = static_cast<int32_t>(lo.size());
    if (hi != nullptr && hi->size() == lo.size()) return BetweenFixed(lo, *hi);
    std::vector<ExprId> alts = {BetweenFixed(lo, std::string(n, '9'))};
    if (hi == nullptr) {
      alts.push_back(g_->Seq({Digits('1', '9'), AnyDigits(n, kUnbounded)}));
    } else {
      const int32_t m = static_cast<int32_t>(hi->size());
      if (m - 1 > n) {
        alts.push_back(g_->Seq({Digits('1', '9'), AnyDigits(n, m - 2)}));
      }
      alts.push_back(BetweenFixed("1" + std::string(m - 1, '0'), *hi));
    }
    return g_->Alt(std::move(alts));
  }

  // Non-empty fraction digits d with 0.d >= 0.s (`strict`: >).
  ExprId FracAtLeast(const std::string& s, bool strict) {
    if (AllZeros(s)) {
      if (!strict) return AnyDigits(1, kUnbounded);
      return g_->Seq({AnyDigits(0, kUnbounded), Digits('1', '9'),
                      AnyDigits(0, kUnbounded)});
    }
    const std::string rest = s.substr(1);
    std::vector<ExprId> after = {FracAtLeast(rest, strict)};
    if (!strict && AllZeros(rest)) after.push_back(g_->Empty());
    return g_->Alt({g_->Seq({Digits(s[0] + 1, '9'), AnyDigits(0, kUnbounded)}),
                    g_->Seq({Lit(s[0]), g_->Alt(std::move(after))})});
  }
  // Non-empty fraction digits d with 0.d <= 0.s (`strict`: <).
  ExprId FracAtMost(const std::string& s, bool strict) {
    if (AllZeros(s)) {
      return strict ? g_->Nothing() : g_->Plus(Lit('0'));
    }
    const std::string rest = s.substr(1);
    std::vector<ExprId> after = {FracAtMost(rest, strict)};
    if (!strict || !AllZeros(rest)) after.push_back(g_->Empty());
    return g_->Alt({g_->Seq({Digits('0', s[0] - 1), AnyDigits(0, kUnbounded)}),
                    g_->Seq({Lit(s[0]), g_->Alt(std::move(after))})});
  }
  // Non-empty d with 0.a <= 0.d <= 0.b (strict flags per side), 0.a <= 0.b.
  ExprId FracBetween(const std::string& a, bool as, const std::string& b,
                     bool bs) {
    if (AllZeros(a) && AllZeros(b)) {
      return as || bs ? g_->Nothing() : g_->Plus(Lit('0'));
    }
    if (AllZeros(a) && !as) return FracAtMost(b, bs);
    const char a0 = a.empty() ? '0' : a[0];
    const char b0 = b.empty() ? '0' : b[0];
    const std::string ra = a.empty() ? "" : a.substr(1);
    const std::string rb = b.empty() ? "" : b.substr(1);
    const bool end_ok_low = !as && AllZeros(ra);  // d ends after this digit
    const bool end_ok_high = !bs || !AllZeros(rb);
    if (a0 == b0) {
      std::vector<ExprId> after = {FracBetween(ra, as, rb, bs)};
      if (end_ok_low && end_ok_high) after.push_back(g_->Empty());
      return g_->Seq({Lit(a0), g_->Alt(std::move(after))});
    }
    std::vector<ExprId> low = {FracAtLeast(ra, as)};
    if (end_ok_low) low.push_back(g_->Empty());
    std::vector<ExprId> high = {FracAtMost(rb, bs)};
    if (end_ok_high) high.push_back(g_->Empty());
    return g_->Alt({g_->Seq({Lit(a0), g_->Alt(std::move(low))}),
                    g_->Seq({Digits(a0 + 1, b0 - 1), AnyDigits(0, kUnbounded)}),
                    g_->Seq({Lit(b0), g_->Alt(std::move(high))})});
  }

  // "." + digits from `frac`, optional when `no_fraction_ok`.
  ExprId Fraction(ExprId frac, bool no_fraction_ok) {
    ExprId f = g_->Seq({Lit('.'), frac});
    return no_fraction_ok ? g_->Optional(f) : f;
  }

  // Non-negative numbers >= lo (lx: >), <= hi when given (hx: <).
  ExprId NonNegative(const Decimal& lo, bool lx, const Decimal* hi, bool hx,
                     bool integer) {
    if (integer) return NonNegativeIntegers(lo, lx, hi, hx);
    if (hi != nullptr) {
      const int c = CompareNonNegative(lo, *hi);
      if (c > 0 || (c == 0 && (lx || hx))) return g_->Nothing();
    }
    const std::string& li = lo.int_digits;
    if (hi != nullptr && li == hi->int_digits) {
      const bool exact_ok =
          !lx && lo.frac.empty() && (!hx || !hi->frac.empty());
      return g_->Seq(
          {g_->Literal(li),
           Fraction(FracBetween(lo.frac, lx, hi->frac, hx), exact_ok)});
    }
    std::vector<ExprId> alts;
    alts.push_back(
        g_->Seq({g_->Literal(li),
                 Fraction(FracAtLeast(lo.frac, lx), !lx && lo.frac.empty())}));
    const std::string next = Increment(li);
    ExprId any_fraction = Fraction(AnyDigits(1, kUnbounded), true);
    if (hi == nullptr) {
      alts.push_back(g_->Seq({IntRange(next, nullptr), any_fraction}));
    } else {
      const std::string& hi_int = hi->int_digits;
      if (CompareInt(next, hi_int) < 0) {
        const std::string below = Decrement(hi_int);
        alts.push_back(g_->Seq({IntRange(next, &below), any_fraction}));
      }
      alts.push_back(
          g_->Seq({g_->Literal(hi_int), Fraction(FracAtMost(hi->frac, hx),
                                                 !hx || !hi->frac.empty())}));
    }
    return g_->Alt(std::move(alts));
  }

  ExprId NonNegativeIntegers(const Decimal& lo, bool lx, const Decimal* hi,
                             bool hx) {
    // The least integer above the bound, the greatest below.
    std::string least = lo.int_digits;
    if (!lo.frac.empty() || lx) least = Increment(least);
    if (hi == nullptr) return IntRange(least, nullptr);
    std::string most = hi->int_digits;
    if (hx && hi->frac.empty()) {
      if (most == "0") return g_->Nothing();
      most = Decrement(most);
    }
    return IntRange(least, &most);
  }

 private:
  Grammar* g_;
};

ExprId UnboundedNumber(Grammar* g, bool integer) {
  ExprId digit = g->Bytes({{'0', '9'}});
  ExprId int_part = g->Alt(
      {g->Literal("0"), g->Seq({g->Bytes({{'1', '9'}}), g->Star(digit)})});
  if (integer) {
    return g->Seq({g->Optional(g->Literal("-")), int_part});
  }
  return g->Seq(
      {g->Optional(g->Literal("-")), int_part,
       g->Optional(g->Seq({g->Literal("."), g->Plus(digit)})),
       g->Optional(g->Seq({g->Bytes({{'e', 'e'}, {'E', 'E'}}),
                           g->Optional(g->Bytes({{'+', '+'}, {'-', '-'}})),
                           g->Plus(digit)}))});
}

Decimal Negate(Decimal d) {
  if (d.int_digits != "0" || !d.frac.empty()) d.negative = !d.negative;
  return d;
}

bool IsZero(const Decimal& d) { return d.int_digits == "0" && d.frac.empty(); }

}  // namespace

absl::StatusOr<ExprId> JsonNumberRange(Grammar* g, const NumberBound& lo,
                                       const NumberBound& hi, bool integer) {
  if (!lo.present && !hi.present) return UnboundedNumber(g, integer);
  Decimal l;
  Decimal h;
  if (lo.present) {
    auto d = ParseDecimal(lo.text);
    if (!d.ok()) return d.status();
    l = *d;
  }
  if (hi.present) {
    auto d = ParseDecimal(hi.text);
    if (!d.ok()) return d.status();
    h = *d;
  }
  // A bound beyond any written number limits nothing on its side.
  const bool has_lo = lo.present && !(l.huge && l.negative);
  const bool has_hi = hi.present && !(h.huge && !h.negative);
  if ((has_lo && l.huge) || (has_hi && h.huge)) return g->Nothing();
  Builder b(g);
  std::vector<ExprId> alts;
  // x >= 0 part: from max(lo, 0) up to hi.
  const bool hi_allows_nonneg =
      !has_hi || (!h.negative && !(IsZero(h) && hi.exclusive));
  if (hi_allows_nonneg) {
    const bool lo_nonneg = has_lo && !l.negative;
    Decimal zero;
    alts.push_back(
        b.NonNegative(lo_nonneg ? l : zero, lo_nonneg && lo.exclusive,
                      has_hi ? &h : nullptr, has_hi && hi.exclusive, integer));
  }
  // x < 0 part: x = -y, y > 0, from max(-hi, 0) up to -lo.
  const bool lo_allows_negative = !has_lo || l.negative;
  if (lo_allows_negative) {
    const bool hi_negative = has_hi && h.negative;
    Decimal y_lo = hi_negative ? Negate(h) : Decimal{};
    const bool y_lo_excl = hi_negative ? hi.exclusive : true;
    Decimal y_hi = has_lo ? Negate(l) : Decimal{};
    alts.push_back(
        g->Seq({g->Literal("-"),
                b.NonNegative(y_lo, y_lo_excl, has_lo ? &y_hi : nullptr,
                              has_lo && lo.exclusive, integer)}));
  }
  return g->Alt(std::move(alts));
}

}  // namespace paceline::engine::grammar
