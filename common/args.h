#ifndef PACELINE_COMMON_ARGS_H_
#define PACELINE_COMMON_ARGS_H_

// Command-line parsing shared by the `paceline` tool and the `pacelined`
// daemon: GNU-style long flags (--name VALUE, --name=VALUE, booleans),
// repeatable flags, positional words, --help; and typed getters for the
// values. Thread-compatible (no shared state).

#include <cstdint>
#include <limits>
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

// Typed flag values. Every error is InvalidArgument and starts with the
// flag ("--threads wants a whole number, got 'many'"); `flag` is the name
// without "--" (it may carry more words, e.g. "tenant alice: WEIGHT").

// Bounds of a whole-number flag, both inclusive.
struct IntRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
};

// Bounds of a number flag; only finite numbers pass in any case.
struct NumberRange {
  double min = -std::numeric_limits<double>::infinity();
  bool min_exclusive = false;  // min itself fails
  double max = std::numeric_limits<double>::infinity();
};
inline constexpr NumberRange kPositive = {.min = 0, .min_exclusive = true};
inline constexpr NumberRange kNonNegative = {.min = 0};

// A whole number in `range`: "--F wants a whole number[ >= MIN | in [MIN,
// MAX]], got 'VALUE'" otherwise.
absl::StatusOr<int64_t> ParseIntFlag(absl::string_view flag,
                                     absl::string_view value,
                                     IntRange range = {});

// A finite number in `range`: "--F wants a number[ > MIN | >= MIN][ <= MAX],
// got 'VALUE'" otherwise.
absl::StatusOr<double> ParseNumberFlag(absl::string_view flag,
                                       absl::string_view value,
                                       NumberRange range = {});

// The getters below read the flag's value (the last occurrence) from
// `args`: std::nullopt when the flag is absent, an error when its value
// does not parse.

// ParseIntFlag of the flag's value.
absl::StatusOr<std::optional<int64_t>> GetIntFlag(const ParsedArgs& args,
                                                  absl::string_view flag,
                                                  IntRange range = {});

// A whole number that fits int32 ("--F: VALUE is out of range" otherwise),
// then in `range` as ParseIntFlag.
absl::StatusOr<std::optional<int32_t>> GetInt32Flag(const ParsedArgs& args,
                                                    absl::string_view flag,
                                                    IntRange range = {});

// A whole number in [0, 2^64 - 1] (a seed): "--F wants a whole number >= 0,
// got 'VALUE'" otherwise.
absl::StatusOr<std::optional<uint64_t>> GetUint64Flag(const ParsedArgs& args,
                                                      absl::string_view flag);

// ParseNumberFlag of the flag's value.
absl::StatusOr<std::optional<double>> GetNumberFlag(const ParsedArgs& args,
                                                    absl::string_view flag,
                                                    NumberRange range = {});

// ParseByteSize (common/byte_size.h) of the flag's value; its error with
// "--F: " in front (the code kept: OutOfRange past 2^64 - 1 bytes).
absl::StatusOr<std::optional<uint64_t>> GetByteSizeFlag(const ParsedArgs& args,
                                                        absl::string_view flag);

// `status` with "--F: " in front of its message, the code kept.
absl::Status ForFlag(absl::string_view flag, const absl::Status& status);

}  // namespace paceline

#endif  // PACELINE_COMMON_ARGS_H_
