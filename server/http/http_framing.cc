#include "server/http/http_framing.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace paceline::server::http {
namespace {

// RFC 9110 §5.6.2: tchar.
bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        !absl::StrContains("!#$%&'*+-.^_`|~", c)) {
      return false;
    }
  }
  return true;
}

// RFC 9110 §5.6.3: OWS is SP and HTAB (not CR, LF or the rest of
// absl's whitespace).
absl::string_view StripOws(absl::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// The non-empty elements of the comma lists `lines`, OWS stripped, in
// order; nullopt when one fails `valid`.
template <class Valid>
std::optional<std::vector<absl::string_view>> ListElements(
    const std::vector<absl::string_view>& lines, Valid valid) {
  std::vector<absl::string_view> out;
  for (absl::string_view line : lines) {
    for (absl::string_view e : absl::StrSplit(line, ',')) {
      e = StripOws(e);
      if (e.empty()) continue;
      if (!valid(e)) return std::nullopt;
      out.push_back(e);
    }
  }
  return out;
}

FramingError Refusal(int status, std::string message) {
  return FramingError{status, std::move(message)};
}

FramingError CheckContentLength(const std::vector<absl::string_view>& lines) {
  auto digits = [](absl::string_view e) {
    uint64_t ignored;
    return absl::c_all_of(e, absl::ascii_isdigit) &&
           absl::SimpleAtoi(e, &ignored);
  };
  const auto values = ListElements(lines, digits);
  if (!values || values->empty()) {
    return Refusal(400, "malformed Content-Length");
  }
  for (absl::string_view v : *values) {
    if (v != values->front()) {
      return Refusal(400, "Content-Length values differ");
    }
  }
  return {};
}

FramingError CheckTransferEncoding(
    const std::vector<absl::string_view>& lines) {
  const auto codings = ListElements(lines, IsToken);
  if (!codings) {
    return Refusal(400,
                   "malformed Transfer-Encoding (expected transfer codings "
                   "separated by commas, without parameters)");
  }
  if (codings->empty() || !absl::EqualsIgnoreCase(codings->back(), "chunked")) {
    return Refusal(400, "the final transfer coding must be chunked");
  }
  for (size_t i = 0; i + 1 < codings->size(); ++i) {
    if (absl::EqualsIgnoreCase((*codings)[i], "chunked")) {
      return Refusal(400, "the chunked transfer coding is applied twice");
    }
  }
  if (codings->size() > 1) {
    return Refusal(501, absl::StrCat("transfer coding '", codings->front(),
                                     "' is not implemented (only chunked)"));
  }
  return {};
}

}  // namespace

void FramingFields::Add(absl::string_view name, absl::string_view value) {
  if (absl::EqualsIgnoreCase(name, "transfer-encoding")) {
    transfer_encoding.push_back(value);
  } else if (absl::EqualsIgnoreCase(name, "content-length")) {
    content_length.push_back(value);
  }
}

FramingError CheckFraming(const FramingFields& fields) {
  if (fields.transfer_encoding.empty()) {
    if (fields.content_length.empty()) return {};
    return CheckContentLength(fields.content_length);
  }
  if (fields.version < 11) {
    return Refusal(400, "Transfer-Encoding is not allowed in HTTP/1.0");
  }
  if (!fields.content_length.empty()) {
    return Refusal(400,
                   "a request may not have both Transfer-Encoding and "
                   "Content-Length");
  }
  return CheckTransferEncoding(fields.transfer_encoding);
}

bool HasObsFold(absl::string_view unparsed, size_t* resume) {
  size_t at = resume != nullptr ? *resume : 0;
  for (;;) {
    const size_t eol = unparsed.find("\r\n", at);
    if (eol == absl::string_view::npos || eol + 2 >= unparsed.size()) break;
    if (eol == at) break;  // the blank line: the header ends
    const char next = unparsed[eol + 2];
    if (next == ' ' || next == '\t') return true;
    at = eol + 2;
  }
  if (resume != nullptr) *resume = at;
  return false;
}

}  // namespace paceline::server::http
