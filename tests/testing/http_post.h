#ifndef PACELINE_TESTS_TESTING_HTTP_POST_H_
#define PACELINE_TESTS_TESTING_HTTP_POST_H_

// A minimal HTTP/1.1 POST over a loopback TCP socket (one request per
// connection, `Connection: close`), for tests that call the daemon's
// OpenAI-compatible API without curl. Header-only, like http_get.h.

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testing/http_get.h"

namespace paceline::testing {

// POSTs `body` as application/json to http://127.0.0.1:port/target, with
// `Authorization: Bearer api_key` unless the key is empty, and reads the
// answer until the server closes. The body is returned as sent: a
// Content-Length answer's body; a chunked one still framed in chunks.
inline HttpResponse HttpPost(int port, const std::string& target,
                             const std::string& body,
                             const std::string& api_key = "") {
  std::string request = absl::StrCat("POST ", target,
                                     " HTTP/1.1\r\n"
                                     "Host: 127.0.0.1\r\n"
                                     "Connection: close\r\n"
                                     "Content-Type: application/json\r\n"
                                     "Content-Length: ",
                                     body.size(), "\r\n");
  if (!api_key.empty()) {
    absl::StrAppend(&request, "Authorization: Bearer ", api_key, "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  return HttpRaw(port, request);
}

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_HTTP_POST_H_
