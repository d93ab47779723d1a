// libFuzzer target for request framing (server/http/http_framing.h): each
// input is a raw request, read as the connection reads it — refused when
// HasObsFold, else Beast's request parser over the header, then
// CheckFraming on its fields — and, separately, its lines as bare
// "name: value" fields given to CheckFraming directly (no Beast, so the
// orders and repeats Beast refuses early still reach it).
//
// Checks beyond the sanitizers':
//   a refusal is 400 or 501, with a message;
//   an accepted framing is at most one of Content-Length and chunked;
//   accepted Transfer-Encoding is HTTP/1.1 and, less separators, "chunked";
//   accepted Content-Length values are all the same number;
//   Beast frames an accepted request's body the same way (chunked, or
//   that Content-Length, or no body);
//   when HasObsFold finds nothing, Beast parsed one field per header line
//   (no fold was joined behind its back).
// The body is then fed to the parser too, under the server's chunk
// extension limit, for the sanitizers.
//
// Replayed by ctest (http_framing_fuzz_replay) over its seeds.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "server/http/http_framing.h"

namespace {

namespace bhttp = ::boost::beast::http;
namespace http = ::paceline::server::http;
using Parser = bhttp::request_parser<bhttp::string_body>;
using boost::system::error_code;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "http_framing_fuzzer invariant violated: %s\n", what);
    std::abort();
  }
}

absl::string_view View(boost::beast::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// `values` joined, less SP, HTAB and commas, in lower case.
std::string Squeezed(const std::vector<absl::string_view>& values) {
  std::string out;
  for (absl::string_view v : values) {
    for (char c : v) {
      if (c != ' ' && c != '\t' && c != ',') out += absl::ascii_tolower(c);
    }
  }
  return out;
}

size_t CountCrlf(absl::string_view s) {
  size_t n = 0;
  for (size_t at = s.find("\r\n"); at != absl::string_view::npos;
       at = s.find("\r\n", at + 2)) {
    ++n;
  }
  return n;
}

// The verdict's invariants that need no parser. Returns whether accepted.
bool CheckVerdict(const http::FramingFields& f, const http::FramingError& e) {
  if (!e.ok()) {
    Check(e.status == 400 || e.status == 501, "a refusal is 400 or 501");
    Check(!e.message.empty(), "a refusal says why");
    return false;
  }
  Check(f.transfer_encoding.empty() || f.content_length.empty(),
        "accepted framing is not both Transfer-Encoding and Content-Length");
  if (!f.transfer_encoding.empty()) {
    Check(f.version >= 11, "accepted Transfer-Encoding is HTTP/1.1");
    Check(Squeezed(f.transfer_encoding) == "chunked",
          "accepted Transfer-Encoding is chunked alone");
  }
  std::vector<uint64_t> lengths;
  for (absl::string_view line : f.content_length) {
    for (absl::string_view v : absl::StrSplit(line, ',')) {
      v = absl::StripAsciiWhitespace(v);
      if (v.empty()) continue;
      Check(absl::SimpleAtoi(v, &lengths.emplace_back()),
            "accepted Content-Length values are numbers");
      Check(lengths.back() == lengths.front(),
            "accepted Content-Length values are the same");
    }
  }
  Check(f.content_length.empty() || !lengths.empty(),
        "accepted Content-Length has a value");
  return true;
}

// Beast's framing of an accepted request matches the fields'.
void CheckBeastAgrees(const Parser& p, const http::FramingFields& f) {
  if (!f.transfer_encoding.empty()) {
    Check(p.chunked(), "Beast reads accepted chunked framing as chunked");
    return;
  }
  Check(!p.chunked(), "Beast reads no chunked framing without the field");
  if (f.content_length.empty()) {
    Check(!p.content_length(), "no Content-Length for Beast either");
    return;
  }
  Check(p.content_length().has_value(), "Beast has the Content-Length");
  for (absl::string_view line : f.content_length) {
    for (absl::string_view v : absl::StrSplit(line, ',', absl::SkipEmpty())) {
      uint64_t n = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &n)) {
        Check(n == *p.content_length(), "Beast's Content-Length is the same");
      }
    }
  }
}

// As the connection's chunk extension limit (http_connection.cc).
struct ChunkExtensionLimit {
  void operator()(uint64_t, boost::beast::string_view ext, error_code& ec) {
    if (ext.size() > 4096) ec = bhttp::error::buffer_overflow;
  }
};

// The rest of the input as body, for the sanitizers.
void FeedBody(Parser& p, absl::string_view rest) {
  error_code ec;
  while (!rest.empty() && !p.is_done()) {
    const size_t used =
        p.put(boost::asio::const_buffer(rest.data(), rest.size()), ec);
    if (ec || used == 0) return;
    rest.remove_prefix(used);
  }
}

void ThroughBeast(absl::string_view input) {
  if (http::HasObsFold(input)) return;  // refused before Beast parses
  Parser p;
  p.header_limit(8192);
  p.body_limit(1 << 20);
  ChunkExtensionLimit limit;
  p.on_chunk_header(limit);
  error_code ec;
  const size_t used =
      p.put(boost::asio::const_buffer(input.data(), input.size()), ec);
  if (ec || !p.is_header_done()) return;
  const absl::string_view header = input.substr(0, used);
  const auto fields =
      static_cast<size_t>(std::distance(p.get().begin(), p.get().end()));
  Check(fields + 2 == CountCrlf(header),
        "one field per header line when HasObsFold finds none");
  http::FramingFields f;
  f.version = static_cast<int>(p.get().version());
  for (const auto& field : p.get()) {
    f.Add(View(field.name_string()), View(field.value()));
  }
  if (!CheckVerdict(f, http::CheckFraming(f))) return;
  CheckBeastAgrees(p, f);
  FeedBody(p, input.substr(used));
}

// CRLF lines "name: value" straight to CheckFraming; a first line without a
// colon ending in "1.0" makes it HTTP/1.0.
void Direct(absl::string_view input) {
  std::vector<std::string> lines = absl::StrSplit(input, "\r\n");
  http::FramingFields f;
  if (!lines.empty() && absl::EndsWith(lines[0], "1.0")) f.version = 10;
  for (const std::string& line : lines) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    f.Add(absl::StripAsciiWhitespace(absl::string_view(line).substr(0, colon)),
          absl::string_view(line).substr(colon + 1));
  }
  CheckVerdict(f, http::CheckFraming(f));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  ThroughBeast(input);
  Direct(input);
  return 0;
}
