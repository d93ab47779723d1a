#ifndef PACELINE_SERVER_HTTP_HTTP_FRAMING_H_
#define PACELINE_SERVER_HTTP_HTTP_FRAMING_H_

// How a request's body is delimited (RFC 9112 §6), checked strictly so
// that this server and any proxy in front of it cannot read the same bytes
// as different requests (request smuggling). Pure functions; the
// connection (http_connection.cc) calls them while reading a request's
// header, before any body byte, and refuses with the status they give,
// closing the connection.
//
// Accepted framings:
//   no Transfer-Encoding, no Content-Length   no body
//   Content-Length (lines and list elements all equal)   that many bytes
//   Transfer-Encoding: chunked, in HTTP/1.1   chunked
// Refused (400 unless said):
//   both Transfer-Encoding and Content-Length (§6.3: never trust the length)
//   Transfer-Encoding in an HTTP/1.0 request
//   a Transfer-Encoding list whose final coding is not chunked (`gzip`,
//   `xchunked`, `chunked, identity`), or that names chunked twice
//   a coding before chunked (`gzip, chunked`): 501, none is implemented
//   a malformed list: elements are bare tokens (no parameters) separated
//   by commas, so `gzip chunked` (an obs-fold Beast turned into a space)
//   is malformed, not chunked
//   a Content-Length that is not digits, or values that differ
// Repeated Transfer-Encoding lines are one list (RFC 9110 §5.3); empty
// list elements are skipped (RFC 9110 §5.6.1).

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace paceline::server::http {

// A request's version and framing fields, as views into the caller's
// parsed header (which must outlive this).
struct FramingFields {
  int version = 11;  // 10: HTTP/1.0, 11: HTTP/1.1 (Beast's numbering)
  std::vector<absl::string_view> transfer_encoding;  // each line's value
  std::vector<absl::string_view> content_length;     // each line's value

  // Keeps the field when it is Transfer-Encoding or Content-Length (in any
  // case); any other field is ignored.
  void Add(absl::string_view name, absl::string_view value);
};

struct FramingError {
  int status = 0;       // 0: acceptable; else 400 or 501
  std::string message;  // why, for the refusal's body
  bool ok() const { return status == 0; }
};

FramingError CheckFraming(const FramingFields& fields);

// Whether the header bytes `unparsed` (the parser's unconsumed input,
// which starts at a line) hold an obs-fold (RFC 9112 §5.2: a line of the
// header section starting with SP or HTAB) before the blank line that ends
// the header. Beast would join it to the previous line with a space; the
// server refuses it (400) instead, so that a folded Transfer-Encoding can
// never mean one thing here and another to a proxy. Bytes after the blank
// line (the body, the next request) are not looked at.
// `resume` (may be null) makes a scan of a growing header linear: the scan
// starts there, and on false it is set to the first line not yet judged
// (its end, or what follows it, has not arrived), so the next call with
// more bytes of the same header goes on from it.
bool HasObsFold(absl::string_view unparsed, size_t* resume = nullptr);

}  // namespace paceline::server::http

#endif  // PACELINE_SERVER_HTTP_HTTP_FRAMING_H_
