#ifndef PACELINE_SERVER_HTTP_HTTP_WIRE_H_
#define PACELINE_SERVER_HTTP_HTTP_WIRE_H_

// The bytes of HTTP/1.1 answers, written by hand (the server parses with
// Beast but writes plain strings, so a queued write is just bytes):
// a whole response with Content-Length, the head of a chunked one, chunks.

#include <string>

#include "absl/strings/string_view.h"
#include "server/http/http_server.h"

namespace paceline::server::http {

// "OK", "Not Found", ...; "Unknown" for a status without a reason phrase.
absl::string_view ReasonPhrase(int status);

// Status line, headers, then "Connection: close" when `close`; ends with
// the blank line. Header names and values are written as given, less any
// CR or LF (so a value can never start a new header).
std::string ResponseHead(int status, const HttpHeaders& headers, bool close);

// A whole response: the head with Content-Length, then the body.
std::string WholeResponse(int status, HttpHeaders headers,
                          absl::string_view body, bool close);

// The head of a chunked response (adds Transfer-Encoding: chunked).
std::string ChunkedHead(int status, HttpHeaders headers, bool close);

// One chunk: size in hex, CRLF, data, CRLF. Empty data gives "" (an empty
// chunk would end the body).
std::string Chunk(absl::string_view data);

// The last chunk: "0\r\n\r\n".
absl::string_view LastChunk();

}  // namespace paceline::server::http

#endif  // PACELINE_SERVER_HTTP_HTTP_WIRE_H_
