#include "server/http/http_wire.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/beast/http/status.hpp"

namespace paceline::server::http {
namespace {

void AppendClean(absl::string_view text, std::string* out) {
  for (char c : text) {
    if (c != '\r' && c != '\n') out->push_back(c);
  }
}

}  // namespace

absl::string_view ReasonPhrase(int status) {
  const auto reason = boost::beast::http::obsolete_reason(
      static_cast<boost::beast::http::status>(status));
  if (reason.empty()) return "Unknown";
  return absl::string_view(reason.data(), reason.size());
}

std::string ResponseHead(int status, const HttpHeaders& headers, bool close) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status), "\r\n");
  for (const auto& [name, value] : headers) {
    AppendClean(name, &out);
    out += ": ";
    AppendClean(value, &out);
    out += "\r\n";
  }
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  return out;
}

std::string WholeResponse(int status, HttpHeaders headers,
                          absl::string_view body, bool close) {
  headers.emplace_back("Content-Length", absl::StrCat(body.size()));
  std::string out = ResponseHead(status, headers, close);
  out.append(body.data(), body.size());
  return out;
}

std::string ChunkedHead(int status, HttpHeaders headers, bool close) {
  headers.emplace_back("Transfer-Encoding", "chunked");
  return ResponseHead(status, headers, close);
}

std::string Chunk(absl::string_view data) {
  if (data.empty()) return "";
  return absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n");
}

absl::string_view LastChunk() { return "0\r\n\r\n"; }

}  // namespace paceline::server::http
