#ifndef PACELINE_TOOLS_PACELINE_CLI_H_
#define PACELINE_TOOLS_PACELINE_CLI_H_

// Shared plumbing of the `paceline` subcommands: argument parsing, exit
// codes and error printing. Each subcommand lives in its own file and is
// listed once in main.cc.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/args.h"
#include "google/protobuf/message.h"

namespace paceline::tools {

using ::paceline::FlagDef;
using ::paceline::ParseArgs;
using ::paceline::ParsedArgs;
using ::paceline::ParseIntFlag;

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and failed
inline constexpr int kExitUsage = 2;    // bad command line

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

// `message` in protobuf's JSON form, as the --json outputs print it: proto
// field names, every field without presence printed (defaults too), one
// field per line, a final newline.
std::string MessageToJson(const google::protobuf::Message& message);

}  // namespace paceline::tools

#endif  // PACELINE_TOOLS_PACELINE_CLI_H_
