#ifndef PACELINE_COMMON_ARGS_H_
#define PACELINE_COMMON_ARGS_H_

// Command-line parsing shared by the `paceline` tool and the `pacelined`
// daemon: GNU-style long flags (--name VALUE, --name=VALUE, booleans),
// repeatable flags, positional words, --help.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paceline {

struct FlagDef {
  absl::string_view name;  // without the leading "--"
  bool takes_value;        // --name VALUE / --name=VALUE; else a boolean
};

// A parsed command line.
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

}  // namespace paceline

#endif  // PACELINE_COMMON_ARGS_H_
