#include "common/byte_size.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace paceline {
namespace {

constexpr uint64_t kMaxBytes = std::numeric_limits<uint64_t>::max();
constexpr int64_t kMaxExponent = 1'000'000;

// An unsigned decimal number: `digits` × 10^`exponent`.
struct Decimal {
  std::string digits;
  int64_t exponent = 0;
};

// The leading run of decimal digits of `*text`, removed from it.
absl::string_view TakeDigits(absl::string_view* text) {
  size_t n = 0;
  while (n < text->size() && absl::ascii_isdigit((*text)[n])) ++n;
  const absl::string_view digits = text->substr(0, n);
  text->remove_prefix(n);
  return digits;
}

// Takes "DIGITS[.DIGITS][(e|E)[+|-]DIGITS]" (either DIGITS may be empty, not
// both) off the front of `*text`. InvalidArgument saying what is wrong.
absl::StatusOr<Decimal> TakeDecimal(absl::string_view* text) {
  Decimal d;
  d.digits = std::string(TakeDigits(text));
  if (absl::ConsumePrefix(text, ".")) {
    const absl::string_view fraction = TakeDigits(text);
    d.digits.append(fraction.data(), fraction.size());
    d.exponent = -static_cast<int64_t>(fraction.size());
  }
  if (d.digits.empty()) {
    return absl::InvalidArgumentError("expected a number, e.g. 24GiB or 1e9");
  }
  if (!absl::ConsumePrefix(text, "e") && !absl::ConsumePrefix(text, "E")) {
    return d;
  }
  const bool negative = absl::ConsumePrefix(text, "-");
  if (!negative) absl::ConsumePrefix(text, "+");
  const absl::string_view exponent = TakeDigits(text);
  if (exponent.empty()) {
    return absl::InvalidArgumentError("exponent has no digits");
  }
  int64_t e = 0;
  if (exponent.size() > 7 || !absl::SimpleAtoi(exponent, &e) ||
      e > kMaxExponent) {
    return absl::InvalidArgumentError("exponent too large");
  }
  d.exponent += negative ? -e : e;
  return d;
}

// Bytes per unit of a unit name ("" and "b" are 1); nullopt when unknown.
std::optional<uint64_t> UnitBytes(absl::string_view name) {
  const std::string unit = absl::AsciiStrToLower(name);
  constexpr uint64_t k = 1000;
  if (unit.empty() || unit == "b") return 1;
  if (unit == "kb") return k;
  if (unit == "mb") return k * k;
  if (unit == "gb") return k * k * k;
  if (unit == "tb") return k * k * k * k;
  if (unit == "kib") return uint64_t{1} << 10;
  if (unit == "mib") return uint64_t{1} << 20;
  if (unit == "gib") return uint64_t{1} << 30;
  if (unit == "tib") return uint64_t{1} << 40;
  return std::nullopt;
}

// d × unit, rounded down. InvalidArgument past 20 significant digits,
// OutOfRange past kMaxBytes.
absl::StatusOr<uint64_t> Scale(Decimal d, uint64_t unit) {
  // Without leading zeros and fractional trailing zeros at most 20
  // significant digits (2^64 - 1 has 20) may remain, so digits × unit <
  // 10^20 × 2^40 < 2^107 fits in 128 bits.
  const size_t first = d.digits.find_first_not_of('0');
  if (first == std::string::npos) return 0;
  d.digits.erase(0, first);
  while (d.exponent < 0 && d.digits.back() == '0') {
    d.digits.pop_back();
    ++d.exponent;
  }
  if (d.digits.size() > 20) {
    return absl::InvalidArgumentError("too many significant digits");
  }
  absl::uint128 value = 0;
  for (char c : d.digits) value = value * 10 + static_cast<uint64_t>(c - '0');
  value *= unit;
  for (; d.exponent > 0 && value <= kMaxBytes; --d.exponent) value *= 10;
  if (d.exponent < -38) return 0;  // below one byte: value < 2^107 < 10^38
  for (; d.exponent < 0; ++d.exponent) value /= 10;
  if (value > kMaxBytes) return absl::OutOfRangeError("");
  return absl::Uint128Low64(value);
}

// ParseByteSize of text without surrounding spaces; the errors without the
// text.
absl::StatusOr<uint64_t> ParseTrimmed(absl::string_view text) {
  ASSIGN_OR_RETURN(const Decimal number, TakeDecimal(&text));
  const std::optional<uint64_t> unit =
      UnitBytes(absl::StripLeadingAsciiWhitespace(text));
  if (!unit.has_value()) {
    return absl::InvalidArgumentError(
        "unknown unit (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  }
  return Scale(number, *unit);
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::StatusOr<uint64_t> bytes =
      ParseTrimmed(absl::StripAsciiWhitespace(text));
  if (bytes.ok()) return bytes;
  if (bytes.status().code() == absl::StatusCode::kOutOfRange) {
    return absl::OutOfRangeError(
        absl::StrCat("'", text, "' is more than 2^64 - 1 bytes"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", text, "' is not a byte size: ", bytes.status().message()));
}

}  // namespace paceline
