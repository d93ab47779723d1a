// Delivery's output -> Anthropic Messages and their events (server/
// anthropic/messages_answer.h). Expected shapes are Anthropic's, as its
// TypeScript client types them (the facts at the top of
// messages_answer.h); the streamed events are also assembled here the way
// the client's MessageStream does (append at content_block_start, address
// by index) and checked equal to the whole answer.
#include "server/anthropic/messages_answer.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "server/openai/openai_response.h"

namespace paceline::server::anthropic {
namespace {

using openai::UsageCounter;

Outgoing Text(std::string text) {
  Outgoing out;
  out.text = std::move(text);
  return out;
}

Outgoing Reasoning(std::string text) {
  Outgoing out;
  out.reasoning = std::move(text);
  return out;
}

chat::ChatToolCallDelta Call(int index, std::string arguments,
                             std::string id = "", std::string name = "") {
  chat::ChatToolCallDelta c;
  c.index = index;
  c.id = std::move(id);
  c.name = std::move(name);
  c.arguments = std::move(arguments);
  return c;
}

Outgoing Calls(std::vector<chat::ChatToolCallDelta> calls) {
  Outgoing out;
  out.tool_calls = std::move(calls);
  return out;
}

Outgoing Finish(scheduler::FinishReason reason, bool called_tools = false,
                std::string stop_string = "") {
  Outgoing out;
  out.kind = Outgoing::Kind::kFinished;
  out.was_accepted = true;
  out.called_tools = called_tools;
  out.finish.reason = reason;
  out.finish.stop_string = std::move(stop_string);
  out.finish.usage.prompt_tokens = 12;
  out.finish.usage.cached_prompt_tokens = 4;
  out.finish.usage.completion_tokens = 9;
  return out;
}

UsageCounter UsageOf(const Outgoing& finished) {
  UsageCounter usage;
  usage.Add(finished.finish.usage, /*first_choice_of_prompt=*/true);
  return usage;
}

struct Event {
  std::string name;
  Json data;
};

// Splits SSE text into events; each must be "event: NAME\ndata: JSON\n\n"
// with the JSON's type equal to NAME.
std::vector<Event> ParseEvents(const std::string& sse) {
  std::vector<Event> events;
  for (absl::string_view chunk :
       absl::StrSplit(sse, "\n\n", absl::SkipEmpty())) {
    std::vector<std::string> lines = absl::StrSplit(chunk, '\n');
    EXPECT_EQ(lines.size(), 2u) << chunk;
    if (lines.size() != 2) continue;
    EXPECT_TRUE(absl::StartsWith(lines[0], "event: ")) << chunk;
    EXPECT_TRUE(absl::StartsWith(lines[1], "data: ")) << chunk;
    Event e{lines[0].substr(7), Json::parse(lines[1].substr(6))};
    EXPECT_EQ(e.data["type"], e.name) << chunk;
    events.push_back(std::move(e));
  }
  return events;
}

// The Message the events describe, built as the client's MessageStream
// builds it.
Json Assemble(const std::vector<Event>& events) {
  Json message;
  std::vector<std::string> json_bufs;
  for (const Event& e : events) {
    const Json& d = e.data;
    if (e.name == "message_start") {
      message = d["message"];
    } else if (e.name == "content_block_start") {
      EXPECT_EQ(d["index"], message["content"].size());
      message["content"].push_back(d["content_block"]);
      json_bufs.emplace_back();
    } else if (e.name == "content_block_delta") {
      const size_t i = d["index"];
      EXPECT_LT(i, message["content"].size());
      Json& block = message["content"][i];
      const Json& delta = d["delta"];
      if (delta["type"] == "text_delta") {
        block["text"] =
            block["text"].get<std::string>() + delta["text"].get<std::string>();
      } else if (delta["type"] == "thinking_delta") {
        block["thinking"] = block["thinking"].get<std::string>() +
                            delta["thinking"].get<std::string>();
      } else if (delta["type"] == "input_json_delta") {
        json_bufs[i] += delta["partial_json"].get<std::string>();
        block["input"] = Json::parse(json_bufs[i], nullptr, false);
      } else {
        ADD_FAILURE() << "delta " << delta;
      }
    } else if (e.name == "message_delta") {
      message["stop_reason"] = d["delta"]["stop_reason"];
      message["stop_sequence"] = d["delta"]["stop_sequence"];
      for (const auto& [k, v] : d["usage"].items()) message["usage"][k] = v;
    }
  }
  return message;
}

std::vector<std::string> Names(const std::vector<Event>& events) {
  std::vector<std::string> names;
  for (const Event& e : events) names.push_back(e.name);
  return names;
}

// Runs `deltas` and `finished` through a streamed and a whole answer;
// returns the streamed events and the whole body.
std::pair<std::vector<Event>, Json> RunBoth(
    const std::vector<Outgoing>& deltas, const Outgoing& finished,
    std::vector<std::string> stops = {}) {
  MessagesAnswer stream("msg_1", "llama", stops);
  scheduler::AcceptInfo accepted;
  accepted.prompt_tokens = 12;
  accepted.cached_prompt_tokens = 2;
  std::string sse = stream.StreamOpened(accepted) + stream.StreamAccepted(0);
  for (const Outgoing& d : deltas) sse += stream.StreamDelta(0, d);
  sse += stream.StreamFinished(0, finished);
  sse += stream.StreamEnd(UsageOf(finished));

  MessagesAnswer whole("msg_1", "llama", stops);
  for (const Outgoing& d : deltas) whole.Add(0, d);
  whole.Finished(0, finished);
  return {ParseEvents(sse), whole.Body(UsageOf(finished))};
}

TEST(MessagesAnswer, Ids) {
  EXPECT_EQ(MessageId(0xabc), "msg_0000000000000abc");
  EXPECT_EQ(ToolUseId("call_abc123XYZ"), "toolu_abc123XYZ");
  EXPECT_EQ(ToolUseId("abc123XYZ"), "toolu_abc123XYZ");
}

TEST(MessagesAnswer, TextMessage) {
  auto [events, body] = RunBoth({Text("Once"), Outgoing{}, Text(" upon")},
                                Finish(scheduler::FinishReason::kStop));
  EXPECT_EQ(body, Json::parse(R"({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "llama",
    "content": [{"type": "text", "text": "Once upon", "citations": null}],
    "stop_reason": "end_turn", "stop_sequence": null,
    "usage": {"input_tokens": 8, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 4, "output_tokens": 9}})"));
  EXPECT_EQ(Names(events),
            (std::vector<std::string>{
                "message_start", "ping", "content_block_start",
                "content_block_delta", "content_block_delta",
                "content_block_stop", "message_delta", "message_stop"}));
  const Json& start = events[0].data["message"];
  EXPECT_EQ(start["content"], Json::array());
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(start["usage"]["input_tokens"], 10);  // the admission's figure
  EXPECT_EQ(start["usage"]["cache_read_input_tokens"], 2);
  EXPECT_EQ(events[2].data, Json::parse(R"({"type": "content_block_start",
      "index": 0, "content_block": {"type": "text", "text": "",
      "citations": null}})"));
  EXPECT_EQ(events[3].data, Json::parse(R"({"type": "content_block_delta",
      "index": 0, "delta": {"type": "text_delta", "text": "Once"}})"));
  EXPECT_EQ(events[6].data["delta"], Json::parse(R"({"stop_reason": "end_turn",
                            "stop_sequence": null})"));
  EXPECT_EQ(events[6].data["usage"]["output_tokens"], 9);
  EXPECT_EQ(Assemble(events), body);
}

TEST(MessagesAnswer, EmptyOutputHasNoBlocks) {
  auto [events, body] = RunBoth({}, Finish(scheduler::FinishReason::kLength));
  EXPECT_EQ(body["content"], Json::array());
  EXPECT_EQ(body["stop_reason"], "max_tokens");
  EXPECT_EQ(Names(events),
            (std::vector<std::string>{"message_start", "ping", "message_delta",
                                      "message_stop"}));
  EXPECT_EQ(Assemble(events), body);
}

TEST(MessagesAnswer, StopReasons) {
  auto stop = [](const Outgoing& finished,
                 std::vector<std::string> stops = {"END"}) {
    Json body = RunBoth({Text("x")}, finished, std::move(stops)).second;
    return std::make_pair(body["stop_reason"], body["stop_sequence"]);
  };
  using R = scheduler::FinishReason;
  EXPECT_EQ(stop(Finish(R::kStop)),
            std::make_pair(Json("end_turn"), Json(nullptr)));
  EXPECT_EQ(stop(Finish(R::kLength)),
            std::make_pair(Json("max_tokens"), Json(nullptr)));
  EXPECT_EQ(stop(Finish(R::kStop, false, "END")),
            std::make_pair(Json("stop_sequence"), Json("END")));
  // A stop string the request did not send (a template's) ends the turn.
  EXPECT_EQ(stop(Finish(R::kStop, false, "<|im_end|>")),
            std::make_pair(Json("end_turn"), Json(nullptr)));
  EXPECT_EQ(stop(Finish(R::kStop, true)),
            std::make_pair(Json("tool_use"), Json(nullptr)));
  // Cut by max_tokens after a complete call: still max_tokens.
  EXPECT_EQ(stop(Finish(R::kLength, true)),
            std::make_pair(Json("max_tokens"), Json(nullptr)));
}

// Reasoning, then text, then two calls whose arguments arrive in pieces
// (the second call's first piece in the same delta as the first's tail).
TEST(MessagesAnswer, ThinkingTextAndToolUse) {
  Outgoing mixed =
      Calls({Call(0, "\"Paris\"}"), Call(1, "{", "call_bbbbbbbbb", "noop")});
  mixed.text = "";
  auto [events, body] =
      RunBoth({Reasoning("hmm"), Reasoning(", weather"), Text("Let me check."),
               Calls({Call(0, "{\"city\": ", "call_aaaaaaaaa", "get_weather")}),
               mixed, Calls({Call(1, "}")})},
              Finish(scheduler::FinishReason::kStop, true));
  EXPECT_EQ(body["content"], Json::parse(R"([
    {"type": "thinking", "thinking": "hmm, weather", "signature": ""},
    {"type": "text", "text": "Let me check.", "citations": null},
    {"type": "tool_use", "id": "toolu_aaaaaaaaa", "name": "get_weather",
     "input": {"city": "Paris"}},
    {"type": "tool_use", "id": "toolu_bbbbbbbbb", "name": "noop",
     "input": {}}])"));
  EXPECT_EQ(body["stop_reason"], "tool_use");
  EXPECT_EQ(Assemble(events), body);
  // The tool_use block opens with its id, name and an empty input, and its
  // arguments come as input_json_delta.
  bool saw_start = false;
  for (const Event& e : events) {
    if (e.name == "content_block_start" && e.data["index"] == 2) {
      saw_start = true;
      EXPECT_EQ(e.data["content_block"], Json::parse(R"({"type": "tool_use",
          "id": "toolu_aaaaaaaaa", "name": "get_weather", "input": {}})"));
    }
    if (e.name == "content_block_delta" && e.data["index"] == 2) {
      EXPECT_EQ(e.data["delta"]["type"], "input_json_delta");
    }
    if (e.name == "content_block_delta" && e.data["index"] == 0) {
      EXPECT_EQ(e.data["delta"]["type"], "thinking_delta");
    }
  }
  EXPECT_TRUE(saw_start);
  // Every started block stops once, in order, before message_delta.
  std::vector<int> started, stopped;
  for (const Event& e : events) {
    if (e.name == "content_block_start") started.push_back(e.data["index"]);
    if (e.name == "content_block_stop") stopped.push_back(e.data["index"]);
  }
  EXPECT_EQ(started, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(stopped, started);
}

// A call the parser gives up on: the stream closes its block (it cannot
// take it back) and its text follows as content; the whole answer leaves
// the call out.
TEST(MessagesAnswer, BrokenCallIsLeftOutOfTheWholeAnswer) {
  Outgoing broken = Text("<tool_call>{\"name\": \"f\", oops");
  broken.broken_tool_calls = {0};
  auto [events, body] =
      RunBoth({Calls({Call(0, "", "call_ccccccccc", "f")}), broken},
              Finish(scheduler::FinishReason::kStop, false));
  EXPECT_EQ(body["content"], Json::parse(R"([{"type": "text",
      "text": "<tool_call>{\"name\": \"f\", oops", "citations": null}])"));
  EXPECT_EQ(body["stop_reason"], "end_turn");
  const Json streamed = Assemble(events);
  ASSERT_EQ(streamed["content"].size(), 2u);
  EXPECT_EQ(streamed["content"][0]["type"], "tool_use");
  EXPECT_EQ(streamed["content"][1], body["content"][0]);
}

TEST(MessagesAnswer, StreamFailedIsAnErrorEvent) {
  MessagesAnswer answer("msg_1", "llama", {});
  const std::vector<Event> events = ParseEvents(
      answer.StreamFailed(absl::ResourceExhaustedError("too slow")));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "error");
  EXPECT_EQ(events[0].data, Json::parse(R"({"type": "error", "error":
      {"type": "rate_limit_error", "message": "too slow"}})"));
}

}  // namespace
}  // namespace paceline::server::anthropic
