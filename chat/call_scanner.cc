#include "chat/call_scanner.h"

#include <utility>

#include "nlohmann/json.hpp"

namespace paceline::chat::internal {
namespace {

bool IsJsonSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool IsScalarByte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
         (c >= 'A' && c <= 'Z') || c == '-' || c == '+' || c == '.';
}

bool StartsScalar(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == 't' || c == 'f' || c == 'n';
}

// JSON strings cannot hold raw control characters.
bool IsControl(char c) { return static_cast<unsigned char>(c) < 0x20; }

// Accepts the text of one JSON value; never throws.
bool IsJson(const std::string& text) {
  return nlohmann::ordered_json::accept(text);
}

}  // namespace

JsonValueScanner::Step JsonValueScanner::Feed(char c) {
  switch (kind_) {
    case Kind::kNone:
      if (c == '"') {
        kind_ = Kind::kString;
        return Step::kMore;
      }
      if (c == '{' || c == '[') {
        kind_ = Kind::kNested;
        depth_ = 1;
        return Step::kMore;
      }
      if (StartsScalar(c)) {
        kind_ = Kind::kScalar;
        scalar_bytes_ = 1;
        return Step::kMore;
      }
      return Step::kError;
    case Kind::kString:
      if (escape_) {
        escape_ = false;
        return Step::kMore;
      }
      if (IsControl(c)) return Step::kError;
      if (c == '\\') escape_ = true;
      return c == '"' ? Step::kDone : Step::kMore;
    case Kind::kNested:
      return FeedNested(c);
    case Kind::kScalar:
      if (!IsScalarByte(c)) return Step::kDoneBefore;
      return ++scalar_bytes_ > kMaxScalarBytes ? Step::kError : Step::kMore;
  }
  return Step::kError;
}

JsonValueScanner::Step JsonValueScanner::FeedNested(char c) {
  if (in_string_) {
    if (escape_) {
      escape_ = false;
    } else if (IsControl(c)) {
      return Step::kError;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
    }
    return Step::kMore;
  }
  switch (c) {
    case '"':
      in_string_ = true;
      return Step::kMore;
    case '{':
    case '[':
      return ++depth_ > kMaxDepth ? Step::kError : Step::kMore;
    case '}':
    case ']':
      return --depth_ == 0 ? Step::kDone : Step::kMore;
    default:
      return Step::kMore;
  }
}

void ToolCallScanner::Reset(bool arguments_only) {
  *this = ToolCallScanner();
  arguments_only_ = arguments_only;
}

ToolCallScanner::Step ToolCallScanner::Feed(char c) {
  switch (state_) {
    case State::kOpen:
      if (IsJsonSpace(c)) return Step::kMore;
      if (c != '{') return Step::kError;
      if (arguments_only_) {
        field_ = Field::kArguments;
        return StartValue(c);
      }
      state_ = State::kKeyOrEnd;
      return Step::kMore;
    case State::kKeyOrEnd:
      if (c == '}') return EndObject();
      [[fallthrough]];
    case State::kKey:
    case State::kInKey:
    case State::kColon:
      return FeedKeyState(c);
    case State::kValueStart:
      if (IsJsonSpace(c)) return Step::kMore;
      return StartValue(c);
    case State::kValue:
      return FeedValue(c);
    case State::kCommaOrEnd:
      return FeedCommaOrEnd(c);
    case State::kDone:
      return Step::kError;
  }
  return Step::kError;
}

ToolCallScanner::Step ToolCallScanner::FeedKeyState(char c) {
  if (state_ != State::kInKey) {
    if (IsJsonSpace(c)) return Step::kMore;
    if (state_ == State::kColon) {
      if (c != ':') return Step::kError;
      state_ = State::kValueStart;
      return Step::kMore;
    }
    if (c != '"') return Step::kError;
    key_.clear();
    state_ = State::kInKey;
    return Step::kMore;
  }
  // No accepted key needs an escape.
  if (c == '\\' || IsControl(c)) return Step::kError;
  if (c != '"') {
    key_ += c;
    return key_.size() > kMaxKeyBytes ? Step::kError : Step::kMore;
  }
  bool* seen = nullptr;
  if (key_ == "name" || key_ == "tool_name") {
    field_ = Field::kName;
    seen = &has_name_;
  } else if (key_ == "arguments" || key_ == "parameters") {
    field_ = Field::kArguments;
    seen = &has_arguments_;
  } else if (key_ == "id" || key_ == "tool_call_id" || key_ == "type") {
    field_ = Field::kOther;
    seen = key_ == "type" ? &has_type_ : &has_id_;
  } else {
    return Step::kError;
  }
  // has_name_ is set when the value has closed; a second "name" key before
  // that is impossible (the first value must close first).
  if (*seen) return Step::kError;
  if (seen == &has_id_ || seen == &has_type_) *seen = true;
  state_ = State::kColon;
  return Step::kMore;
}

ToolCallScanner::Step ToolCallScanner::StartValue(char c) {
  if (field_ == Field::kName && c != '"') return Step::kError;
  if (field_ == Field::kArguments && c != '{') return Step::kError;
  value_.Reset();
  value_raw_.clear();
  state_ = State::kValue;
  return FeedValue(c);
}

ToolCallScanner::Step ToolCallScanner::FeedValue(char c) {
  JsonValueScanner::Step step = value_.Feed(c);
  if (step == JsonValueScanner::Step::kError) return Step::kError;
  if (step == JsonValueScanner::Step::kDoneBefore) {
    if (EndValue() == Step::kError) return Step::kError;
    return FeedCommaOrEnd(c);
  }
  std::string& text = field_ == Field::kArguments ? arguments_ : value_raw_;
  text += c;
  if (step == JsonValueScanner::Step::kMore) return Step::kMore;
  Step end = EndValue();
  if (end == Step::kError) text.pop_back();  // `c` is not consumed
  return end;
}

ToolCallScanner::Step ToolCallScanner::EndValue() {
  switch (field_) {
    case Field::kName: {
      auto name = nlohmann::ordered_json::parse(value_raw_, nullptr,
                                                /*allow_exceptions=*/false);
      if (name.is_discarded() || !name.is_string()) return Step::kError;
      name_ = name.get<std::string>();
      if (name_.empty()) return Step::kError;
      has_name_ = true;
      break;
    }
    case Field::kArguments:
      if (!IsJson(arguments_)) return Step::kError;
      has_arguments_ = true;
      if (arguments_only_) {
        state_ = State::kDone;
        return Step::kDone;
      }
      break;
    case Field::kOther:
      if (!IsJson(value_raw_)) return Step::kError;
      break;
  }
  state_ = State::kCommaOrEnd;
  return Step::kMore;
}

ToolCallScanner::Step ToolCallScanner::FeedCommaOrEnd(char c) {
  if (IsJsonSpace(c)) return Step::kMore;
  if (c == '}') return EndObject();
  if (c != ',') return Step::kError;
  state_ = State::kKey;
  return Step::kMore;
}

ToolCallScanner::Step ToolCallScanner::EndObject() {
  if (!has_name_) return Step::kError;
  if (!has_arguments_) {
    arguments_ = "{}";
    has_arguments_ = true;
  }
  state_ = State::kDone;
  return Step::kDone;
}

std::string ToolCallScanner::TakeArguments() {
  std::string taken = arguments_.substr(arguments_taken_);
  arguments_taken_ = arguments_.size();
  return taken;
}

}  // namespace paceline::chat::internal
