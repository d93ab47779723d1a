#include "common/args.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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

absl::StatusOr<int64_t> ParseIntFlag(absl::string_view flag,
                                     absl::string_view value) {
  int64_t out = 0;
  if (!absl::SimpleAtoi(value, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " wants a whole number, got '", value, "'"));
  }
  return out;
}

}  // namespace paceline
