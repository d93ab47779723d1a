#ifndef PACELINE_TOOLS_PACELINE_SSE_PARSER_H_
#define PACELINE_TOOLS_PACELINE_SSE_PARSER_H_

// A parser of server-sent events (the text/event-stream format of the
// WHATWG HTML standard, "Server-sent events", §9.2.6 "Interpreting an event
// stream"), fed the response body as it arrives, in pieces of any size.
//
// The rules it follows: lines end in CRLF, LF or CR (a CRLF split between
// two pieces is one line end); a leading UTF-8 BOM is dropped; a line that
// starts with ':' is a comment; otherwise the field name runs to the first
// ':' (the whole line when there is none) and one space after the ':' is
// dropped from the value; `data` appends the value and a '\n' to the data
// buffer, `event` sets the type, `id` the last event id (ignored when it
// holds a NUL), `retry` and other fields are ignored; a blank line
// dispatches the event when its data buffer is non-empty (less its final
// '\n'; type "message" unless set) and resets data and type. An event left
// without its blank line when the stream ends is never dispatched.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace paceline::tools {

struct SseEvent {
  std::string type = "message";
  std::string data;
  std::string id;  // the last event id as of this event ("" if none)
};

class SseParser {
 public:
  // Lines and events are bounded by `max_bytes` (a buffered line, or an
  // event's data, past it is an error), so a hostile server cannot make
  // the client allocate without bound.
  explicit SseParser(size_t max_bytes = 4 << 20) : max_bytes_(max_bytes) {}

  // Parses `bytes`, the next piece of the stream, appending each event it
  // completes to `*events`. ResourceExhausted when a line or an event's
  // data passes the bound; the parser then refuses every later piece with
  // the same error. Not thread-safe.
  absl::Status Feed(absl::string_view bytes, std::vector<SseEvent>* events);

 private:
  // Splits BOM-less `bytes` into lines, handing each complete one to Line.
  absl::Status Scan(absl::string_view bytes, std::vector<SseEvent>* events);
  // One line, without its end: a field, a comment, or the blank line that
  // dispatches.
  void Line(absl::string_view line, std::vector<SseEvent>* events);

  const size_t max_bytes_;
  absl::Status failed_;
  bool at_start_ = true;   // no byte seen past a possible BOM yet
  bool after_cr_ = false;  // the last byte scanned was a CR (a line end)
  std::string line_;       // the current line, not yet ended
  std::string data_;       // the event's data so far
  std::string type_;       // "" = "message"
  std::string last_id_;
};

}  // namespace paceline::tools

#endif  // PACELINE_TOOLS_PACELINE_SSE_PARSER_H_
