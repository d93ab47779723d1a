#ifndef PACELINE_TOOLS_PACELINE_CLI_H_
#define PACELINE_TOOLS_PACELINE_CLI_H_

// Shared plumbing of the `paceline` subcommands: argument parsing, exit
// codes and error printing. Each subcommand lives in its own file and is
// listed once in main.cc.

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paceline::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and failed
inline constexpr int kExitUsage = 2;    // bad command line

struct FlagDef {
  absl::string_view name;  // without the leading "--"
  bool takes_value;        // --name VALUE / --name=VALUE; else a boolean
};

// The parsed command line of one subcommand.
class ParsedArgs {
 public:
  bool help() const { return help_; }
  bool Has(absl::string_view flag) const { return values_.contains(flag); }
  // The value of a flag that takes one (the last occurrence wins).
  std::optional<std::string> Get(absl::string_view flag) const;
  // Every value of a repeatable flag, in command-line order.
  std::vector<std::string> GetAll(absl::string_view flag) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(std::span<const std::string> args,
                                              std::span<const FlagDef> flags);
  bool help_ = false;
  absl::flat_hash_map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// Parses `args` (the words after the subcommand name). `--help` / `-h` set
// help(). An unknown flag, a missing value, or a value given to a boolean
// flag is InvalidArgument naming the flag. A bare "--" ends flag parsing.
absl::StatusOr<ParsedArgs> ParseArgs(std::span<const std::string> args,
                                     std::span<const FlagDef> flags);

// Parses a flag value as a whole number; InvalidArgument naming the flag.
absl::StatusOr<int64_t> ParseIntFlag(absl::string_view flag,
                                     absl::string_view value);

// Prints "paceline <command>: <message>" and the usage text to stderr;
// returns kExitUsage.
int UsageError(absl::string_view command, absl::string_view usage,
               absl::string_view message);

// Prints "paceline <command>: error: <status message>" to stderr; returns
// kExitFailure.
int Failure(absl::string_view command, const absl::Status& status);

// "1,185,376" — digits grouped by thousands.
std::string GroupDigits(uint64_t n);

// "14.0 GB (13.0 GiB)" — decimal and binary units side by side.
std::string HumanBytes(uint64_t bytes);

// JSON string literal (quotes included) with the escapes JSON requires.
std::string JsonQuote(absl::string_view s);

}  // namespace paceline::tools

#endif  // PACELINE_TOOLS_PACELINE_CLI_H_
