#include "server/openai/responses_answer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_http.h"

namespace paceline::server::openai {
namespace {

// splitmix64: distinct item ids from one seed.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::string ResponsesId(absl::string_view prefix, uint64_t random) {
  return absl::StrFormat("%s%016x", prefix, random);
}

ResponsesAnswer::ResponsesAnswer(ResponsesContext context)
    : context_(std::move(context)) {}

void ResponsesAnswer::RespondError(http::HttpExchange& exchange,
                                   const absl::Status& status,
                                   std::function<void(bool)> done) const {
  openai::RespondError(exchange, status, std::move(done));
}

std::string ResponsesAnswer::NextItemId(absl::string_view prefix) {
  return ResponsesId(prefix, Mix(context_.item_seed + items_made_++));
}

void ResponsesAnswer::Event(const char* type, Json fields,
                            std::string* events) {
  if (events == nullptr) return;
  Json data = Json::object();
  data["type"] = type;
  data["sequence_number"] = sequence_++;
  for (auto& [key, value] : fields.items()) data[key] = std::move(value);
  absl::StrAppend(events, "event: ", type, "\ndata: ", Dump(data), "\n\n");
}

Json ResponsesAnswer::ItemJson(const Item& item) const {
  Json out = Json::object();
  out["id"] = item.id;
  switch (item.kind) {
    case Kind::kMessage: {
      out["type"] = "message";
      out["status"] = item.status;
      out["role"] = "assistant";
      Json content = Json::array();
      if (item.status != "in_progress") {
        content.push_back({{"type", "output_text"},
                           {"text", item.text},
                           {"annotations", Json::array()},
                           {"logprobs", Json::array()}});
      }
      out["content"] = std::move(content);
      break;
    }
    case Kind::kReasoning: {
      out["type"] = "reasoning";
      out["summary"] = Json::array();
      Json content = Json::array();
      if (item.status != "in_progress") {
        content.push_back({{"type", "reasoning_text"}, {"text", item.text}});
      }
      out["content"] = std::move(content);
      out["status"] = item.status;
      break;
    }
    case Kind::kCall:
      out["type"] = "function_call";
      out["status"] = item.status;
      out["call_id"] = item.call_id;
      out["name"] = item.name;
      out["arguments"] = item.status == "in_progress" ? "" : item.text;
      break;
  }
  return out;
}

ResponsesAnswer::Item& ResponsesAnswer::Open(Kind kind, std::string* events) {
  if (open_ >= 0 && items_[open_].kind == kind && kind != Kind::kCall) {
    return items_[open_];
  }
  Close("completed", events);
  Item item;
  item.kind = kind;
  item.id = NextItemId(kind == Kind::kMessage     ? "msg_"
                       : kind == Kind::kReasoning ? "rs_"
                                                  : "fc_");
  items_.push_back(std::move(item));
  open_ = static_cast<int>(items_.size()) - 1;
  const Item& added = items_[open_];
  Event("response.output_item.added",
        {{"output_index", open_}, {"item", ItemJson(added)}}, events);
  if (kind == Kind::kMessage) {
    Event("response.content_part.added",
          {{"item_id", added.id},
           {"output_index", open_},
           {"content_index", 0},
           {"part",
            {{"type", "output_text"},
             {"text", ""},
             {"annotations", Json::array()},
             {"logprobs", Json::array()}}}},
          events);
  } else if (kind == Kind::kReasoning) {
    Event("response.content_part.added",
          {{"item_id", added.id},
           {"output_index", open_},
           {"content_index", 0},
           {"part", {{"type", "reasoning_text"}, {"text", ""}}}},
          events);
  }
  return items_[open_];
}

void ResponsesAnswer::Close(absl::string_view status, std::string* events) {
  if (open_ < 0) return;
  const int index = open_;
  open_ = -1;
  Item& item = items_[index];
  item.status = std::string(status);
  switch (item.kind) {
    case Kind::kMessage:
      Event("response.output_text.done",
            {{"item_id", item.id},
             {"output_index", index},
             {"content_index", 0},
             {"text", item.text},
             {"logprobs", Json::array()}},
            events);
      break;
    case Kind::kReasoning:
      Event("response.reasoning_text.done",
            {{"item_id", item.id},
             {"output_index", index},
             {"content_index", 0},
             {"text", item.text}},
            events);
      break;
    case Kind::kCall:
      if (!item.broken) {
        Event("response.function_call_arguments.done",
              {{"item_id", item.id},
               {"output_index", index},
               {"name", item.name},
               {"arguments", item.text}},
              events);
      }
      break;
  }
  if (item.kind != Kind::kCall) {  // a message's or reasoning's one part
    Event("response.content_part.done",
          {{"item_id", item.id},
           {"output_index", index},
           {"content_index", 0},
           {"part", ItemJson(item)["content"][0]}},
          events);
  }
  Event("response.output_item.done",
        {{"output_index", index}, {"item", ItemJson(item)}}, events);
}

void ResponsesAnswer::TakeCall(const chat::ChatToolCallDelta& call,
                               std::string* events) {
  auto it = calls_.find(call.index);
  if (it == calls_.end()) {
    Close("completed", events);
    Item& item = Open(Kind::kCall, nullptr);  // announced below, named
    item.name = call.name;
    item.call_id = call.id;
    calls_[call.index] = open_;
    Event("response.output_item.added",
          {{"output_index", open_}, {"item", ItemJson(item)}}, events);
    it = calls_.find(call.index);
  }
  Item& item = items_[it->second];
  if (call.arguments.empty()) return;
  item.text += call.arguments;
  Event("response.function_call_arguments.delta",
        {{"item_id", item.id},
         {"output_index", it->second},
         {"delta", call.arguments}},
        events);
}

void ResponsesAnswer::Take(const Outgoing& delta, std::string* events) {
  if (delta.kind != Outgoing::Kind::kDelta) return;
  // A malformed call first: its text comes back as content in this delta.
  for (int index : delta.broken_tool_calls) {
    auto it = calls_.find(index);
    if (it == calls_.end()) continue;
    items_[it->second].broken = true;
    if (open_ == it->second) Close("incomplete", events);
  }
  if (!delta.reasoning.empty() && delta.text.empty() &&
      delta.tool_calls.empty()) {
    reasoning_tokens_ += static_cast<int64_t>(delta.ids.size());
  }
  if (!delta.reasoning.empty()) {
    Item& item = Open(Kind::kReasoning, events);
    item.text += delta.reasoning;
    Event("response.reasoning_text.delta",
          {{"item_id", item.id},
           {"output_index", open_},
           {"content_index", 0},
           {"delta", delta.reasoning}},
          events);
  }
  if (!delta.text.empty()) {
    Item& item = Open(Kind::kMessage, events);
    item.text += delta.text;
    Event("response.output_text.delta",
          {{"item_id", item.id},
           {"output_index", open_},
           {"content_index", 0},
           {"delta", delta.text},
           {"logprobs", Json::array()}},
          events);
  }
  for (const chat::ChatToolCallDelta& call : delta.tool_calls) {
    TakeCall(call, events);
  }
}

void ResponsesAnswer::Finish(const Outgoing& finished, std::string* events) {
  incomplete_ = finished.finish.reason == scheduler::FinishReason::kLength;
  Close(incomplete_ ? "incomplete" : "completed", events);
}

Json ResponsesAnswer::UsageJson(const UsageCounter& usage) const {
  return {{"input_tokens", usage.prompt_tokens()},
          {"input_tokens_details", {{"cached_tokens", usage.cached_tokens()}}},
          {"output_tokens", usage.completion_tokens()},
          {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens_}}},
          {"total_tokens", usage.prompt_tokens() + usage.completion_tokens()}};
}

Json ResponsesAnswer::ResponseJson(absl::string_view status, Json usage,
                                   bool with_broken) const {
  Json out = Json::object();
  out["id"] = context_.id;
  out["object"] = "response";
  out["created_at"] = context_.created_at;
  out["status"] = status;
  out["background"] = false;
  out["error"] = nullptr;
  out["incomplete_details"] = status == "incomplete"
                                  ? Json{{"reason", "max_output_tokens"}}
                                  : Json(nullptr);
  out["model"] = context_.model;
  Json output = Json::array();
  for (const Item& item : items_) {
    if (item.broken && !with_broken) continue;
    output.push_back(ItemJson(item));
  }
  out["output"] = std::move(output);
  out["previous_response_id"] = nullptr;
  for (const auto& [key, value] : context_.echo.items()) out[key] = value;
  out["usage"] = std::move(usage);
  return out;
}

std::string ResponsesAnswer::StreamOpened(const scheduler::AcceptInfo&) {
  std::string events;
  const Json response = ResponseJson("in_progress", nullptr, true);
  Event("response.created", {{"response", response}}, &events);
  Event("response.in_progress", {{"response", response}}, &events);
  return events;
}

std::string ResponsesAnswer::StreamAccepted(int) { return ""; }

std::string ResponsesAnswer::StreamDelta(int, const Outgoing& delta) {
  std::string events;
  Take(delta, &events);
  return events;
}

std::string ResponsesAnswer::StreamFinished(int, const Outgoing& finished) {
  std::string events;
  Finish(finished, &events);
  return events;
}

std::string ResponsesAnswer::StreamEnd(const UsageCounter& usage) {
  std::string events;
  const char* status = incomplete_ ? "incomplete" : "completed";
  Event(incomplete_ ? "response.incomplete" : "response.completed",
        {{"response", ResponseJson(status, UsageJson(usage), true)}}, &events);
  return events;
}

std::string ResponsesAnswer::StreamFailed(const absl::Status& status) {
  const Json error =
      Json::parse(ToErrorResponse(status).body, nullptr, false)["error"];
  std::string events;
  Event("error",
        {{"code", error["code"].is_null() ? error["type"] : error["code"]},
         {"message", error["message"]},
         {"param", error["param"]}},
        &events);
  return events;
}

void ResponsesAnswer::Add(int, const Outgoing& delta) { Take(delta, nullptr); }

void ResponsesAnswer::Finished(int, const Outgoing& finished) {
  Finish(finished, nullptr);
}

Json ResponsesAnswer::Body(const UsageCounter& usage) {
  return ResponseJson(incomplete_ ? "incomplete" : "completed",
                      UsageJson(usage), false);
}

}  // namespace paceline::server::openai
