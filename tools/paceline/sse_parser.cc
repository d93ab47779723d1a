#include "tools/paceline/sse_parser.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace paceline::tools {
namespace {

constexpr absl::string_view kBom = "\xEF\xBB\xBF";

}  // namespace

absl::Status SseParser::Feed(absl::string_view bytes,
                             std::vector<SseEvent>* events) {
  if (!failed_.ok()) return failed_;
  if (!at_start_) return Scan(bytes, events);
  // The BOM may itself arrive split: `line_` holds its first bytes.
  const std::string head = absl::StrCat(line_, bytes);
  line_.clear();
  if (head.size() < kBom.size() && absl::StartsWith(kBom, head)) {
    line_ = head;
    return absl::OkStatus();
  }
  at_start_ = false;
  absl::string_view rest = head;
  absl::ConsumePrefix(&rest, kBom);
  return Scan(rest, events);
}

absl::Status SseParser::Scan(absl::string_view bytes,
                             std::vector<SseEvent>* events) {
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c == '\n' && after_cr_) {  // the LF of a CRLF: the line has ended
      after_cr_ = false;
      start = i + 1;
      continue;
    }
    after_cr_ = c == '\r';
    if (c != '\n' && c != '\r') continue;
    absl::StrAppend(&line_, bytes.substr(start, i - start));
    Line(line_, events);
    line_.clear();
    start = i + 1;
    if (!failed_.ok()) return failed_;
  }
  absl::StrAppend(&line_, bytes.substr(start));
  if (line_.size() > max_bytes_) {
    failed_ = absl::ResourceExhaustedError(
        absl::StrCat("an event-stream line passed ", max_bytes_, " bytes"));
  }
  return failed_;
}

void SseParser::Line(absl::string_view line, std::vector<SseEvent>* events) {
  if (line.empty()) {
    if (!data_.empty()) {
      data_.pop_back();  // the final '\n'
      SseEvent e;
      if (!type_.empty()) e.type = std::move(type_);
      e.data = std::move(data_);
      e.id = last_id_;
      events->push_back(std::move(e));
    }
    data_.clear();
    type_.clear();
    return;
  }
  if (line.front() == ':') return;  // a comment
  const size_t colon = line.find(':');
  const absl::string_view field = line.substr(0, colon);
  absl::string_view value;
  if (colon != absl::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    absl::StrAppend(&data_, value, "\n");
    if (data_.size() > max_bytes_) {
      failed_ = absl::ResourceExhaustedError(
          absl::StrCat("an event's data passed ", max_bytes_, " bytes"));
    }
  } else if (field == "event") {
    type_ = std::string(value);
  } else if (field == "id") {
    if (value.find('\0') == absl::string_view::npos) {
      last_id_ = std::string(value);
    }
  }
}

}  // namespace paceline::tools
