#ifndef PACELINE_SERVER_HTTP_CORS_H_
#define PACELINE_SERVER_HTTP_CORS_H_

// Cross-origin resource sharing (the Fetch standard's CORS protocol,
// https://fetch.spec.whatwg.org/#http-cors-protocol), so that browser
// clients and web UIs on other origins can call the APIs. A wrapper around
// any handler:
//  - A preflight (OPTIONS with Origin and Access-Control-Request-Method)
//    from an allowed origin is answered here, 204 with
//    Access-Control-Allow-Origin (the origin, or "*" when every origin is
//    allowed), -Allow-Methods (GET, POST, OPTIONS), -Allow-Headers (the
//    requested ones: Authorization, Content-Type, x-api-key and the SDKs'
//    own), -Max-Age 600; from any other origin 403. Preflights carry no
//    credentials, so they never reach the key check.
//  - Any other request from an allowed origin goes to the handler, and its
//    answer (whole or streamed) gets Access-Control-Allow-Origin, Vary:
//    Origin, and Access-Control-Expose-Headers for the headers clients read
//    (retry-after, retry-after-ms). Requests from other origins and those
//    without Origin are served as they are, with no CORS headers (the
//    browser then withholds the answer from the page).
// No allowed origins (the default): the handler itself.

#include <string>
#include <vector>

#include "server/http/http_server.h"

namespace paceline::server::http {

struct CorsOptions {
  // Origins as browsers send them ("https://app.example.com",
  // "http://localhost:3000"); "*" allows every origin.
  std::vector<std::string> allowed_origins;
};

HttpHandler WithCors(CorsOptions options, HttpHandler handler);

}  // namespace paceline::server::http

#endif  // PACELINE_SERVER_HTTP_CORS_H_
