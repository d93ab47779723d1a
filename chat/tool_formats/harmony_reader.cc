#include "chat/tool_formats/harmony_reader.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace paceline::chat::internal {
namespace {

constexpr absl::string_view kMessage = "<|message|>";
constexpr absl::string_view kChannel = "<|channel|>";
constexpr absl::string_view kEnds[] = {"<|end|>", "<|call|>", "<|return|>"};
constexpr size_t kMaxNameBytes = 128;

// The longest suffix of `text` that an end marker starts with.
size_t HeldSuffix(absl::string_view text) {
  for (size_t n = std::min<size_t>(text.size(), 9); n > 0; --n) {
    absl::string_view tail = text.substr(text.size() - n);
    for (absl::string_view end : kEnds) {
      if (end.size() > n && absl::StartsWith(end, tail)) return n;
    }
  }
  return 0;
}

// The word after `key` in `header` (up to whitespace or `<`), or "".
absl::string_view WordAfter(absl::string_view header, absl::string_view key) {
  size_t at = header.find(key);
  if (at == absl::string_view::npos) return "";
  absl::string_view rest = header.substr(at + key.size());
  size_t n = 0;
  while (n < rest.size() && !absl::ascii_isspace(rest[n]) && rest[n] != '<') {
    ++n;
  }
  return rest.substr(0, n);
}

}  // namespace

HarmonyReader::Result HarmonyReader::Next(absl::string_view text, bool final) {
  switch (state_) {
    case State::kHeader:
      return StepHeader(text, final);
    case State::kBody:
      return StepBody(text, final);
    case State::kPlain:
      break;
  }
  if (text.empty()) return {Event::kMore, 0};
  return {Event::kContent, text.size()};
}

std::string HarmonyReader::TakeArguments() {
  std::string taken = arguments_.substr(arguments_taken_);
  arguments_taken_ = arguments_.size();
  return taken;
}

HarmonyReader::Result HarmonyReader::StepHeader(absl::string_view text,
                                                bool final) {
  size_t pos = text.find(kMessage);
  if (pos == absl::string_view::npos) {
    if (!final && text.size() <= kMaxHeaderBytes + kMessage.size()) {
      return {Event::kMore, 0};
    }
    if (text.empty()) return {Event::kMore, 0};
    state_ = State::kPlain;
    return {Event::kHeader, 0};
  }
  if (pos > kMaxHeaderBytes || !ReadHeader(text.substr(0, pos))) {
    state_ = State::kPlain;
    return {Event::kHeader, 0};
  }
  state_ = State::kBody;
  const size_t consumed = pos + kMessage.size();
  return {channel_ == Channel::kCall ? Event::kAnnounce : Event::kHeader,
          consumed};
}

bool HarmonyReader::ReadHeader(absl::string_view header) {
  header = absl::StripAsciiWhitespace(header);
  absl::ConsumePrefix(&header, "<|start|>");
  absl::ConsumePrefix(&header, "assistant");
  if (!absl::StrContains(header, kChannel)) return false;
  absl::string_view channel = WordAfter(header, kChannel);
  absl::string_view recipient = WordAfter(header, "to=");
  if (absl::ConsumePrefix(&recipient, "functions.")) {
    if (recipient.empty() || recipient.size() > kMaxNameBytes) return false;
    channel_ = Channel::kCall;
    name_ = std::string(recipient);
    arguments_.clear();
    arguments_taken_ = 0;
    return true;
  }
  channel_ = channel == "analysis" ? Channel::kReasoning : Channel::kContent;
  return true;
}

HarmonyReader::Result HarmonyReader::StepBody(absl::string_view text,
                                              bool final) {
  size_t pos = absl::string_view::npos;
  size_t marker = 0;
  for (absl::string_view end : kEnds) {
    size_t at = text.find(end);
    if (at < pos) {
      pos = at;
      marker = end.size();
    }
  }
  if (pos == 0) return EndBody(marker);
  size_t n = pos != absl::string_view::npos ? pos
             : final                        ? text.size()
                                            : text.size() - HeldSuffix(text);
  if (n == 0) return final ? EndBody(0) : Result{Event::kMore, 0};
  switch (channel_) {
    case Channel::kReasoning:
      return {Event::kReasoning, n};
    case Channel::kContent:
      return {Event::kContent, n};
    case Channel::kCall:
      break;
  }
  if (arguments_.size() + n > kMaxArgumentsBytes) {
    state_ = State::kPlain;
    return {Event::kBroken, 0};
  }
  arguments_.append(text.data(), n);
  return {Event::kArguments, n};
}

HarmonyReader::Result HarmonyReader::EndBody(size_t marker_bytes) {
  state_ = State::kHeader;
  if (channel_ != Channel::kCall) return {Event::kHeader, marker_bytes};
  absl::string_view body = absl::StripAsciiWhitespace(arguments_);
  const bool object = !body.empty() && body.front() == '{' &&
                      nlohmann::ordered_json::accept(body);
  channel_ = Channel::kContent;
  if (object) return {Event::kCallDone, marker_bytes};
  // The broken call's body goes out as content; the marker is dropped.
  return {Event::kBroken, marker_bytes};
}

}  // namespace paceline::chat::internal
