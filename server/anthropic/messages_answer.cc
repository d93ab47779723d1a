#include "server/anthropic/messages_answer.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/anthropic/anthropic_error.h"
#include "server/anthropic/messages_request.h"
#include "server/openai/openai_json.h"

namespace paceline::server::anthropic {
namespace {

using Kind = ContentBlocks::Kind;
using Step = ContentBlocks::Step;

// One server-sent event: the JSON's `type` is the event's name.
std::string Event(absl::string_view name, Json data) {
  return absl::StrCat("event: ", name, "\ndata: ", openai::Dump(data), "\n\n");
}

// {"type": name} with nothing else yet: `type` first, as Anthropic's are.
Json Typed(absl::string_view name) {
  Json j = Json::object();
  j["type"] = std::string(name);
  return j;
}

Json UsageJson(int64_t prompt, int64_t output, int64_t cached) {
  Json usage = Json::object();
  usage["input_tokens"] = prompt - cached;
  usage["cache_creation_input_tokens"] = 0;
  usage["cache_read_input_tokens"] = cached;
  usage["output_tokens"] = output;
  return usage;
}

Json UsageJson(const openai::UsageCounter& usage) {
  return UsageJson(usage.prompt_tokens(), usage.completion_tokens(),
                   usage.cached_tokens());
}

Json DeltaJson(const ContentBlocks::Block& block, const std::string& piece) {
  switch (block.kind) {
    case Kind::kText: {
      Json d = Typed("text_delta");
      d["text"] = piece;
      return d;
    }
    case Kind::kThinking: {
      Json d = Typed("thinking_delta");
      d["thinking"] = piece;
      return d;
    }
    case Kind::kToolUse: {
      Json d = Typed("input_json_delta");
      d["partial_json"] = piece;
      return d;
    }
  }
  return Json::object();
}

}  // namespace

std::string MessageId(uint64_t random) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(random));
  return absl::StrCat("msg_", hex);
}

std::string ToolUseId(absl::string_view parser_id) {
  absl::ConsumePrefix(&parser_id, "call_");
  return absl::StrCat(kToolUseIdPrefix, parser_id);
}

int ContentBlocks::Use(Kind kind, int call, std::vector<Step>* steps) {
  if (open_ >= 0 && blocks_[open_].kind == kind &&
      blocks_[open_].call == call) {
    return open_;
  }
  for (Step& s : Close()) steps->push_back(std::move(s));
  Block block;
  block.kind = kind;
  block.call = call;
  blocks_.push_back(std::move(block));
  open_ = static_cast<int>(blocks_.size()) - 1;
  steps->push_back({Step::Op::kStart, open_, ""});
  return open_;
}

std::vector<Step> ContentBlocks::Close() {
  std::vector<Step> steps;
  if (open_ >= 0) steps.push_back({Step::Op::kStop, open_, ""});
  open_ = -1;
  return steps;
}

std::vector<Step> ContentBlocks::Add(const Outgoing& delta) {
  std::vector<Step> steps;
  auto append = [&](int b, const std::string& piece) {
    if (piece.empty()) return;
    blocks_[b].text += piece;
    steps.push_back({Step::Op::kDelta, b, piece});
  };
  // A call's pieces: its block (the last with its index), or a new one.
  auto call = [&](const chat::ChatToolCallDelta& c) {
    int b = -1;
    for (int i = static_cast<int>(blocks_.size()) - 1; i >= 0 && b < 0; --i) {
      if (blocks_[i].kind == Kind::kToolUse && blocks_[i].call == c.index) {
        b = i;
      }
    }
    if (b < 0) {
      b = Use(Kind::kToolUse, c.index, &steps);
      blocks_[b].id = ToolUseId(c.id);
      blocks_[b].name = c.name;
    }
    append(b, c.arguments);
  };
  // What continues the open call goes first: a coalesced delta may hold
  // its tail and then what followed it.
  const int open_call = open_ >= 0 && blocks_[open_].kind == Kind::kToolUse
                            ? blocks_[open_].call
                            : -1;
  for (const chat::ChatToolCallDelta& c : delta.tool_calls) {
    if (c.index == open_call) call(c);
  }
  if (!delta.reasoning.empty()) {
    append(Use(Kind::kThinking, -1, &steps), delta.reasoning);
  }
  if (!delta.text.empty()) append(Use(Kind::kText, -1, &steps), delta.text);
  for (const chat::ChatToolCallDelta& c : delta.tool_calls) {
    if (c.index != open_call) call(c);
  }
  for (int index : delta.broken_tool_calls) {
    for (size_t i = 0; i < blocks_.size(); ++i) {
      Block& b = blocks_[i];
      if (b.kind != Kind::kToolUse || b.call != index) continue;
      b.broken = true;
      if (open_ == static_cast<int>(i)) {
        for (Step& s : Close()) steps.push_back(std::move(s));
      }
    }
  }
  return steps;
}

Json BlockJson(const ContentBlocks::Block& block, bool empty) {
  switch (block.kind) {
    case Kind::kText: {
      Json j = Typed("text");
      j["text"] = empty ? "" : block.text;
      j["citations"] = nullptr;
      return j;
    }
    case Kind::kThinking: {
      Json j = Typed("thinking");
      j["thinking"] = empty ? "" : block.text;
      j["signature"] = "";
      return j;
    }
    case Kind::kToolUse: {
      Json j = Typed("tool_use");
      j["id"] = block.id;
      j["name"] = block.name;
      Json input = Json::object();
      if (!empty) {
        input = Json::parse(block.text, nullptr, /*allow_exceptions=*/false);
      }
      j["input"] = std::move(input);
      return j;
    }
  }
  return Json::object();
}

MessagesAnswer::MessagesAnswer(std::string id, std::string model,
                               std::vector<std::string> stop_sequences)
    : id_(std::move(id)),
      model_(std::move(model)),
      stop_sequences_(std::move(stop_sequences)) {}

void MessagesAnswer::RespondError(http::HttpExchange& exchange,
                                  const absl::Status& status,
                                  std::function<void(bool)> done) const {
  anthropic::RespondError(exchange, status, std::move(done));
}

std::string MessagesAnswer::Events(const std::vector<Step>& steps) const {
  std::string out;
  for (const Step& s : steps) {
    const ContentBlocks::Block& block = blocks_.blocks()[s.block];
    switch (s.op) {
      case Step::Op::kStart: {
        Json e = Typed("content_block_start");
        e["index"] = s.block;
        e["content_block"] = BlockJson(block, /*empty=*/true);
        absl::StrAppend(&out, Event("content_block_start", std::move(e)));
        break;
      }
      case Step::Op::kDelta: {
        Json e = Typed("content_block_delta");
        e["index"] = s.block;
        e["delta"] = DeltaJson(block, s.piece);
        absl::StrAppend(&out, Event("content_block_delta", std::move(e)));
        break;
      }
      case Step::Op::kStop: {
        Json e = Typed("content_block_stop");
        e["index"] = s.block;
        absl::StrAppend(&out, Event("content_block_stop", std::move(e)));
        break;
      }
    }
  }
  return out;
}

std::string MessagesAnswer::StreamOpened(
    const scheduler::AcceptInfo& accepted) {
  Json start = Typed("message_start");
  start["message"] = MessageJson(
      Json::array(), nullptr, nullptr,
      UsageJson(accepted.prompt_tokens, 0, accepted.cached_prompt_tokens));
  return absl::StrCat(Event("message_start", std::move(start)),
                      Event("ping", Typed("ping")));
}

std::string MessagesAnswer::StreamAccepted(int) { return ""; }

std::string MessagesAnswer::StreamDelta(int, const Outgoing& delta) {
  return Events(blocks_.Add(delta));
}

std::string MessagesAnswer::StreamFinished(int, const Outgoing& finished) {
  SetStop(finished);
  return Events(blocks_.Close());
}

std::string MessagesAnswer::StreamEnd(const openai::UsageCounter& usage) {
  Json delta = Json::object();
  delta["stop_reason"] = stop_reason_;
  delta["stop_sequence"] = stop_sequence_;
  Json e = Typed("message_delta");
  e["delta"] = std::move(delta);
  e["usage"] = UsageJson(usage);
  return absl::StrCat(Event("message_delta", std::move(e)),
                      Event("message_stop", Typed("message_stop")));
}

std::string MessagesAnswer::StreamFailed(const absl::Status& status) {
  return ErrorEvent(status);
}

void MessagesAnswer::Add(int, const Outgoing& delta) { blocks_.Add(delta); }

void MessagesAnswer::Finished(int, const Outgoing& finished) {
  SetStop(finished);
}

Json MessagesAnswer::Body(const openai::UsageCounter& usage) {
  Json content = Json::array();
  for (const ContentBlocks::Block& block : blocks_.blocks()) {
    if (block.broken) continue;
    Json j = BlockJson(block, /*empty=*/false);
    // A call the parser let through is a JSON object; anything else would
    // break the client's `input`, so it is left out as a broken one is.
    if (block.kind == Kind::kToolUse && !j["input"].is_object()) continue;
    content.push_back(std::move(j));
  }
  return MessageJson(std::move(content), stop_reason_, stop_sequence_,
                     UsageJson(usage));
}

Json MessagesAnswer::MessageJson(Json content, Json stop_reason,
                                 Json stop_sequence, Json usage) const {
  Json message = Json::object();
  message["id"] = id_;
  message["type"] = "message";
  message["role"] = "assistant";
  message["model"] = model_;
  message["content"] = std::move(content);
  message["stop_reason"] = std::move(stop_reason);
  message["stop_sequence"] = std::move(stop_sequence);
  message["usage"] = std::move(usage);
  return message;
}

void MessagesAnswer::SetStop(const Outgoing& finished) {
  const scheduler::FinishInfo& finish = finished.finish;
  stop_sequence_ = nullptr;
  if (finish.reason == scheduler::FinishReason::kLength) {
    stop_reason_ = "max_tokens";
  } else if (finished.called_tools) {
    stop_reason_ = "tool_use";
  } else if (!finish.stop_string.empty() &&
             std::find(stop_sequences_.begin(), stop_sequences_.end(),
                       finish.stop_string) != stop_sequences_.end()) {
    stop_reason_ = "stop_sequence";
    stop_sequence_ = finish.stop_string;
  } else {
    stop_reason_ = "end_turn";
  }
}

}  // namespace paceline::server::anthropic
