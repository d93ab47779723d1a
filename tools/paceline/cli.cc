#include "tools/paceline/cli.h"

#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace paceline::tools {

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

int UsageError(absl::string_view command, absl::string_view usage,
               absl::string_view message) {
  std::cerr << "paceline " << command << ": " << message << "\n\n" << usage;
  return kExitUsage;
}

int Failure(absl::string_view command, const absl::Status& status) {
  std::cerr << "paceline " << command << ": error: " << status.message()
            << "\n";
  return kExitFailure;
}

std::string GroupDigits(uint64_t n) {
  std::string digits = absl::StrCat(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1000) return absl::StrCat(bytes, " B");
  static constexpr const char* kDecimal[] = {"kB", "MB", "GB", "TB", "PB"};
  static constexpr const char* kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double dec = static_cast<double>(bytes) / 1000,
         bin = static_cast<double>(bytes) / 1024;
  int di = 0, bi = 0;
  while (dec >= 1000 && di < 4) dec /= 1000, ++di;
  while (bin >= 1024 && bi < 4) bin /= 1024, ++bi;
  return absl::StrFormat("%.2f %s (%.2f %s)", dec, kDecimal[di], bin,
                         kBinary[bi]);
}

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
}

}  // namespace paceline::tools
