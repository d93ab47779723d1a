#include "common/args.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/byte_size.h"
#include "common/status_macros.h"

namespace paceline {

std::optional<std::string> ParsedArgs::Get(absl::string_view flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::GetAll(absl::string_view flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return {};
  return it->second;
}

absl::StatusOr<ParsedArgs> ParseArgs(std::span<const std::string> args,
                                     std::span<const FlagDef> flags) {
  ParsedArgs parsed;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-' ||
        (arg[1] != '-' && arg != "-h")) {
      parsed.positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      parsed.help_ = true;
      continue;
    }
    absl::string_view body = absl::string_view(arg).substr(2);
    std::optional<std::string> inline_value;
    if (size_t eq = body.find('='); eq != absl::string_view::npos) {
      inline_value = std::string(body.substr(eq + 1));
      body = body.substr(0, eq);
    }
    const FlagDef* def = nullptr;
    for (const FlagDef& f : flags) {
      if (f.name == body) def = &f;
    }
    if (def == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", body));
    }
    if (!def->takes_value) {
      if (inline_value.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", body, " takes no value"));
      }
      parsed.values_[body].push_back("");
      continue;
    }
    if (!inline_value.has_value()) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", body, " needs a value"));
      }
      inline_value = args[++i];
    }
    parsed.values_[body].push_back(*std::move(inline_value));
  }
  return parsed;
}

namespace {

constexpr int64_t kIntMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kIntMax = std::numeric_limits<int64_t>::max();

// " >= 1", " in [0, 1024]", "" for no bounds.
std::string Describe(IntRange range) {
  if (range.min == kIntMin && range.max == kIntMax) return "";
  if (range.max == kIntMax) return absl::StrCat(" >= ", range.min);
  if (range.min == kIntMin) return absl::StrCat(" <= ", range.max);
  return absl::StrCat(" in [", range.min, ", ", range.max, "]");
}

// " > 0", " >= 0", " in (0, 1]", "" for no bounds.
std::string Describe(NumberRange range) {
  const bool has_min = std::isfinite(range.min);
  const bool has_max = std::isfinite(range.max);
  if (has_min && has_max) {
    return absl::StrCat(" in ", range.min_exclusive ? "(" : "[", range.min,
                        ", ", range.max, "]");
  }
  if (has_min) {
    return absl::StrCat(range.min_exclusive ? " > " : " >= ", range.min);
  }
  if (has_max) return absl::StrCat(" <= ", range.max);
  return "";
}

template <typename Range>
absl::Status WantsError(absl::string_view flag, absl::string_view what,
                        Range range, absl::string_view value) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, " wants ", what, Describe(range), ", got '", value, "'"));
}

}  // namespace

absl::StatusOr<int64_t> ParseIntFlag(absl::string_view flag,
                                     absl::string_view value, IntRange range) {
  int64_t out = 0;
  if (!absl::SimpleAtoi(value, &out) || out < range.min || out > range.max) {
    return WantsError(flag, "a whole number", range, value);
  }
  return out;
}

absl::StatusOr<double> ParseNumberFlag(absl::string_view flag,
                                       absl::string_view value,
                                       NumberRange range) {
  double out = 0;
  if (!absl::SimpleAtod(value, &out) || !std::isfinite(out) ||
      out < range.min || (range.min_exclusive && out == range.min) ||
      out > range.max) {
    return WantsError(flag, "a number", range, value);
  }
  return out;
}

absl::StatusOr<std::optional<int64_t>> GetIntFlag(const ParsedArgs& args,
                                                  absl::string_view flag,
                                                  IntRange range) {
  const std::optional<std::string> value = args.Get(flag);
  if (!value.has_value()) return std::nullopt;
  return ParseIntFlag(flag, *value, range);
}

absl::StatusOr<std::optional<int32_t>> GetInt32Flag(const ParsedArgs& args,
                                                    absl::string_view flag,
                                                    IntRange range) {
  const std::optional<std::string> value = args.Get(flag);
  if (!value.has_value()) return std::nullopt;
  ASSIGN_OR_RETURN(const int64_t n, ParseIntFlag(flag, *value));
  if (n < std::numeric_limits<int32_t>::min() ||
      n > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", *value, " is out of range"));
  }
  ASSIGN_OR_RETURN(const int64_t in_range, ParseIntFlag(flag, *value, range));
  return static_cast<int32_t>(in_range);
}

absl::StatusOr<std::optional<uint64_t>> GetUint64Flag(const ParsedArgs& args,
                                                      absl::string_view flag) {
  const std::optional<std::string> value = args.Get(flag);
  if (!value.has_value()) return std::nullopt;
  uint64_t out = 0;
  if (!absl::SimpleAtoi(*value, &out)) {
    return WantsError(flag, "a whole number", IntRange{.min = 0}, *value);
  }
  return out;
}

absl::StatusOr<std::optional<double>> GetNumberFlag(const ParsedArgs& args,
                                                    absl::string_view flag,
                                                    NumberRange range) {
  const std::optional<std::string> value = args.Get(flag);
  if (!value.has_value()) return std::nullopt;
  return ParseNumberFlag(flag, *value, range);
}

absl::StatusOr<std::optional<uint64_t>> GetByteSizeFlag(
    const ParsedArgs& args, absl::string_view flag) {
  const std::optional<std::string> value = args.Get(flag);
  if (!value.has_value()) return std::nullopt;
  absl::StatusOr<uint64_t> bytes = ParseByteSize(*value);
  if (!bytes.ok()) return ForFlag(flag, bytes.status());
  return *bytes;
}

absl::Status ForFlag(absl::string_view flag, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("--", flag, ": ", status.message()));
}

}  // namespace paceline
