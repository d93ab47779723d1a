#include "chat/tool_formats/markup_reader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace paceline::chat::internal {
namespace {

using Json = nlohmann::ordered_json;

enum class Match { kYes, kNo, kMaybe };

// `text` starts with `marker` (kYes), or may still (kMaybe: it is a
// shorter prefix of it and more text may come).
Match MatchMarker(absl::string_view text, absl::string_view marker,
                  bool final) {
  if (marker.empty()) return Match::kNo;
  if (absl::StartsWith(text, marker)) return Match::kYes;
  if (!final && absl::StartsWith(marker, text)) return Match::kMaybe;
  return Match::kNo;
}

size_t LeadingSpaces(absl::string_view text) {
  size_t n = 0;
  while (n < text.size() && absl::ascii_isspace(text[n])) ++n;
  return n;
}

// A name, key or id: no whitespace, control bytes or markup.
bool IsPlainToken(absl::string_view text) {
  if (text.empty() || text.size() > MarkupReader::kMaxNameBytes) return false;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || c == '<' || c == '>' || c == '"' || c == '{' || c == '}' ||
        c == 0x7f) {
      return false;
    }
  }
  return true;
}

std::string JsonString(absl::string_view text) {
  return Json(std::string(text))
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

void MarkupReader::Begin(const ToolSyntax* syntax,
                         const ToolParameterTypes* types) {
  *this = MarkupReader();
  syntax_ = syntax;
  types_ = types;
  if (syntax->body == CallBody::kJsonCall) {
    state_ = !syntax->array_prefix.empty() ? State::kArrayPrefix
             : syntax->array               ? State::kArrayOpen
                                           : State::kJsonCall;
    scanner_.Reset(/*arguments_only=*/false);
    scanning_ = true;
  } else if (syntax->call_open.empty()) {
    state_ = syntax->id_end.empty() ? State::kName : State::kId;
  }
}

MarkupReader::Result MarkupReader::Next(absl::string_view text, bool final) {
  switch (state_) {
    case State::kCallOrEnd:
      return StepCallOrEnd(text, final);
    case State::kArrayPrefix:
    case State::kArrayOpen:
    case State::kArrayNext:
      return StepArray(text, final);
    case State::kJsonCall:
    case State::kJsonArguments:
      return StepJson(text, final);
    case State::kId:
    case State::kName:
      return StepHeader(text, final);
    case State::kArgumentsOpen:
    case State::kArgumentsClose:
    case State::kCallClose:
      return StepAfterArguments(text, final);
    case State::kParameterOrClose:
      return StepParameterOrClose(text, final);
    case State::kParameterKey:
    case State::kParameterAttrs:
    case State::kValueOpen:
      return StepParameterHeader(text, final);
    case State::kValue:
      return StepValue(text, final);
    case State::kSectionClose:
      return StepSectionClose(text, final);
  }
  return Broken(0);
}

std::string MarkupReader::TakeArguments() {
  if (scanning_) return scanner_.TakeArguments();
  return std::exchange(arguments_, "");
}

MarkupReader::Result MarkupReader::StepCallOrEnd(absl::string_view text,
                                                 bool final) {
  size_t spaces = LeadingSpaces(text);
  absl::string_view rest = text.substr(spaces);
  Match call = MatchMarker(rest, syntax_->call_open, final);
  if (call == Match::kYes) {
    name_.clear();
    id_.clear();
    arguments_.clear();
    first_parameter_ = true;
    scanning_ = false;
    scanned_ = 0;
    state_ = syntax_->id_end.empty() ? State::kName : State::kId;
    return {Event::kProgress, spaces + syntax_->call_open.size()};
  }
  Match close = MatchMarker(rest, syntax_->section_close, final);
  if (close == Match::kYes) {
    return {Event::kEnd, spaces + syntax_->section_close.size()};
  }
  if (call == Match::kMaybe || close == Match::kMaybe) {
    return {Event::kMore, spaces};
  }
  return calls_ > 0 ? Result{Event::kEnd, spaces} : Broken(spaces);
}

MarkupReader::Result MarkupReader::StepArray(absl::string_view text,
                                             bool final) {
  size_t spaces = LeadingSpaces(text);
  absl::string_view rest = text.substr(spaces);
  if (state_ == State::kArrayPrefix) {
    Match m = MatchMarker(rest, syntax_->array_prefix, final);
    if (m == Match::kMaybe) return {Event::kMore, spaces};
    if (m == Match::kNo) return Broken(spaces);
    state_ = State::kArrayOpen;
    return {Event::kProgress, spaces + syntax_->array_prefix.size()};
  }
  if (rest.empty()) {
    if (!final) return {Event::kMore, spaces};
    return calls_ > 0 ? Result{Event::kEnd, spaces} : Broken(spaces);
  }
  const bool open = state_ == State::kArrayOpen;
  if ((open && rest[0] == '[') || (!open && rest[0] == ',')) {
    name_.clear();
    scanner_.Reset(/*arguments_only=*/false);
    scanning_ = true;
    state_ = State::kJsonCall;
    return {Event::kProgress, spaces + 1};
  }
  if (!open && rest[0] == ']') {
    state_ = State::kSectionClose;
    return {Event::kProgress, spaces + 1};
  }
  return open ? Broken(spaces) : Result{Event::kEnd, spaces};
}

MarkupReader::Result MarkupReader::StepJson(absl::string_view text,
                                            bool final) {
  const bool whole_call = state_ == State::kJsonCall;
  for (size_t i = 0; i < text.size(); ++i) {
    ToolCallScanner::Step step = scanner_.Feed(text[i]);
    if (step == ToolCallScanner::Step::kError) return Broken(i);
    if (whole_call && name_.empty() && scanner_.has_name()) {
      name_ = scanner_.name();
      return {Event::kAnnounce, i + 1};
    }
    if (step == ToolCallScanner::Step::kDone) {
      if (whole_call) return CallDone(i + 1);
      state_ = State::kArgumentsClose;
      return {Event::kProgress, i + 1};
    }
  }
  return final ? Broken(text.size()) : Result{Event::kMore, text.size()};
}

MarkupReader::Result MarkupReader::StepHeader(absl::string_view text,
                                              bool final) {
  const bool id = state_ == State::kId;
  absl::string_view end = id ? syntax_->id_end : syntax_->name_end;
  // Room for a prefix and Kimi's `:IDX` around the name.
  size_t cap = kMaxNameBytes + syntax_->name_prefix.size() + 16;
  size_t pos = FindFrom(text, end);
  if (pos == absl::string_view::npos) {
    if (final || text.size() > cap + end.size()) return Broken(0);
    return {Event::kMore, 0};
  }
  if (pos > cap) return Broken(0);
  absl::string_view header = text.substr(0, pos);
  size_t consumed = pos + (id || !syntax_->name_end_kept ? end.size() : 0);
  scanned_ = 0;
  if (id) {
    header = absl::StripAsciiWhitespace(header);
    if (!IsPlainToken(header)) return Broken(0);
    id_ = std::string(header);
    state_ = State::kName;
    return {Event::kProgress, consumed};
  }
  if (!SetName(header)) return Broken(0);
  if (name_ == syntax_->content_name) return {Event::kContent, consumed};
  state_ = syntax_->body == CallBody::kXmlParameters ? State::kParameterOrClose
                                                     : State::kArgumentsOpen;
  return {Event::kAnnounce, consumed};
}

bool MarkupReader::SetName(absl::string_view header) {
  header = absl::StripAsciiWhitespace(header);
  absl::ConsumePrefix(&header, syntax_->name_prefix);
  if (syntax_->name_has_index) {
    size_t colon = header.rfind(':');
    if (colon != absl::string_view::npos) header = header.substr(0, colon);
  }
  if (!IsPlainToken(header)) return false;
  name_ = std::string(header);
  return true;
}

MarkupReader::Result MarkupReader::StepAfterArguments(absl::string_view text,
                                                      bool final) {
  size_t spaces = LeadingSpaces(text);
  absl::string_view rest = text.substr(spaces);
  absl::string_view marker =
      state_ == State::kArgumentsOpen    ? syntax_->arguments_open
      : state_ == State::kArgumentsClose ? syntax_->arguments_close
                                         : syntax_->call_close;
  Match m = MatchMarker(rest, marker, final);
  if (m == Match::kMaybe) return {Event::kMore, spaces};
  size_t consumed = spaces + (m == Match::kYes ? marker.size() : 0);
  switch (state_) {
    case State::kArgumentsOpen:
      if (m == Match::kNo && !marker.empty()) return Broken(spaces);
      scanner_.Reset(/*arguments_only=*/true);
      scanning_ = true;
      state_ = State::kJsonArguments;
      return {Event::kProgress, consumed};
    case State::kArgumentsClose:
      state_ = State::kCallClose;
      return {Event::kProgress, consumed};
    default:
      // A complete JSON call stands without its closing marker.
      return CallDone(consumed);
  }
}

MarkupReader::Result MarkupReader::StepParameterOrClose(absl::string_view text,
                                                        bool final) {
  size_t spaces = LeadingSpaces(text);
  absl::string_view rest = text.substr(spaces);
  Match parameter = MatchMarker(rest, syntax_->parameter_open, final);
  if (parameter == Match::kYes) {
    scanned_ = 0;
    state_ = State::kParameterKey;
    return {Event::kProgress, spaces + syntax_->parameter_open.size()};
  }
  Match close = MatchMarker(rest, syntax_->call_close, final);
  if (close == Match::kYes) {
    arguments_ += first_parameter_ ? "{}" : "}";
    return CallDone(spaces + syntax_->call_close.size());
  }
  if (parameter == Match::kMaybe || close == Match::kMaybe) {
    return {Event::kMore, spaces};
  }
  return Broken(spaces);
}

MarkupReader::Result MarkupReader::StepParameterHeader(absl::string_view text,
                                                       bool final) {
  const ToolSyntax& s = *syntax_;
  if (state_ == State::kValueOpen) {
    size_t spaces = LeadingSpaces(text);
    Match m = MatchMarker(text.substr(spaces), s.value_open, final);
    if (m == Match::kMaybe) return {Event::kMore, spaces};
    if (m == Match::kNo) return Broken(spaces);
    scanned_ = 0;
    state_ = State::kValue;
    return {Event::kProgress, spaces + s.value_open.size()};
  }
  const bool key = state_ == State::kParameterKey;
  absl::string_view end = key ? s.parameter_key_end : s.parameter_attrs_end;
  size_t cap = key ? kMaxNameBytes : kMaxAttrsBytes;
  size_t pos = FindFrom(text, end);
  if (pos == absl::string_view::npos) {
    if (final || text.size() > cap + end.size()) return Broken(0);
    return {Event::kMore, 0};
  }
  if (pos > cap) return Broken(0);
  absl::string_view header = text.substr(0, pos);
  if (key) {
    header = absl::StripAsciiWhitespace(header);
    if (!IsPlainToken(header)) return Broken(0);
    key_ = std::string(header);
    hint_ = ValueHint::kNone;
  } else {
    hint_ = absl::StrContains(header, "string=\"true\"")    ? ValueHint::kString
            : absl::StrContains(header, "string=\"false\"") ? ValueHint::kJson
                                                            : ValueHint::kNone;
  }
  scanned_ = 0;
  state_ = key && !s.parameter_attrs_end.empty() ? State::kParameterAttrs
           : s.value_open.empty()                ? State::kValue
                                                 : State::kValueOpen;
  return {Event::kProgress, pos + end.size()};
}

MarkupReader::Result MarkupReader::StepValue(absl::string_view text,
                                             bool final) {
  size_t pos = FindFrom(text, syntax_->parameter_close);
  if (pos == absl::string_view::npos) {
    if (final || text.size() > kMaxValueBytes) return Broken(0);
    return {Event::kMore, 0};
  }
  ToolParameterTypes::Kind declared = types_ == nullptr
                                          ? ToolParameterTypes::Kind::kUnknown
                                          : types_->Find(name_, key_);
  arguments_ += first_parameter_ ? "{" : ", ";
  first_parameter_ = false;
  arguments_ += JsonString(key_);
  arguments_ += ": ";
  arguments_ += ParameterValueJson(text.substr(0, pos), declared, hint_);
  scanned_ = 0;
  state_ = State::kParameterOrClose;
  return {Event::kProgress, pos + syntax_->parameter_close.size()};
}

MarkupReader::Result MarkupReader::StepSectionClose(absl::string_view text,
                                                    bool final) {
  size_t spaces = LeadingSpaces(text);
  Match m = MatchMarker(text.substr(spaces), syntax_->section_close, final);
  if (m == Match::kMaybe) return {Event::kMore, spaces};
  if (m == Match::kYes) {
    return {Event::kEnd, spaces + syntax_->section_close.size()};
  }
  return {Event::kEnd, spaces};
}

size_t MarkupReader::FindFrom(absl::string_view text,
                              absl::string_view marker) {
  size_t pos = text.find(marker, scanned_);
  if (pos == absl::string_view::npos && text.size() >= marker.size()) {
    scanned_ = std::max(scanned_, text.size() - marker.size() + 1);
  }
  return pos;
}

MarkupReader::Result MarkupReader::CallDone(size_t consumed) {
  ++calls_;
  if (syntax_->body == CallBody::kJsonCall) {
    state_ = syntax_->array ? State::kArrayNext : State::kSectionClose;
  } else {
    state_ =
        syntax_->call_open.empty() ? State::kSectionClose : State::kCallOrEnd;
  }
  return {Event::kCallDone, consumed};
}

}  // namespace paceline::chat::internal
