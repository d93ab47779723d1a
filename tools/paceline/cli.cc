#include "tools/paceline/cli.h"

#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"

namespace paceline::tools {

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

std::string MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  // Fails only for a message with unknown Any types; these have none.
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok())
    return absl::StrCat("{\"error\": ", JsonQuote(status.ToString()), "}\n");
  if (out.empty() || out.back() != '\n') out += '\n';
  return out;
}

}  // namespace paceline::tools
