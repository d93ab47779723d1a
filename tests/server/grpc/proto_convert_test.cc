// The wire form of a chat request's split output: tool-call deltas as
// streamed, the unary answer (broken calls left out), and when the finish
// reason becomes TOOL_CALLS.

#include "server/grpc/proto_convert.h"

#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.pb.h"
#include "server/delivery/stream_buffer.h"

namespace paceline::server {
namespace {

chat::ChatToolCallDelta Call(int index, std::string id, std::string name,
                               std::string arguments) {
  chat::ChatToolCallDelta c;
  c.index = index;
  c.id = std::move(id);
  c.name = std::move(name);
  c.arguments = std::move(arguments);
  return c;
}

TEST(ProtoConvertTest, ToolCallDeltasKeepIndexIdNameAndArgumentText) {
  google::protobuf::RepeatedPtrField<v1::ToolCallDelta> out;
  AddToolCallDeltas({Call(0, "call_a", "f", "{\"x\""), Call(1, "", "", "1}")},
                    &out);
  ASSERT_EQ(out.size(), 2);
  EXPECT_EQ(out[0].index(), 0);
  EXPECT_EQ(out[0].id(), "call_a");
  EXPECT_EQ(out[0].name(), "f");
  EXPECT_EQ(out[0].arguments(), "{\"x\"");
  EXPECT_EQ(out[1].index(), 1);
  EXPECT_EQ(out[1].arguments(), "1}");
}

TEST(ProtoConvertTest, ChatAnswerMergesDeltasAndLeavesBrokenCallsOut) {
  // Three calls streamed in pieces; call 1 turned out malformed.
  Outgoing all;
  chat::ChatOutputDelta d1;
  d1.content = "Let me check. ";
  d1.reasoning = "need weather";
  d1.tool_calls = {Call(0, "call_a", "weather", "{\"city\": ")};
  AppendChatDelta(d1, &all);
  chat::ChatOutputDelta d2;
  d2.tool_calls = {Call(0, "", "", "\"Paris\"}"),
                   Call(1, "call_b", "bad", "{")};
  AppendChatDelta(d2, &all);
  chat::ChatOutputDelta d3;
  d3.content = "<tool_call>{\"name\": \"bad\", {";
  d3.broken_tool_calls = {1};
  d3.tool_calls = {Call(2, "call_c", "time", "{}")};
  AppendChatDelta(d3, &all);

  v1::CompleteResponse answer;
  FillChatAnswer(all, &answer);
  EXPECT_EQ(answer.text(), "Let me check. <tool_call>{\"name\": \"bad\", {");
  EXPECT_EQ(answer.reasoning(), "need weather");
  ASSERT_EQ(answer.tool_calls_size(), 2);
  EXPECT_EQ(answer.tool_calls(0).id(), "call_a");
  EXPECT_EQ(answer.tool_calls(0).type(), "function");
  EXPECT_EQ(answer.tool_calls(0).function().name(), "weather");
  EXPECT_EQ(answer.tool_calls(0).function().arguments(),
            "{\"city\": \"Paris\"}");
  EXPECT_EQ(answer.tool_calls(1).id(), "call_c");
  EXPECT_EQ(answer.tool_calls(1).function().name(), "time");
}

TEST(ProtoConvertTest, ToolCallsFinishOnlyWhenTheModelEndedItself) {
  for (v1::FinishReason reason :
       {v1::FINISH_REASON_EOS, v1::FINISH_REASON_STOP_SEQUENCE}) {
    v1::Finished f;
    f.set_reason(reason);
    MarkToolCallsFinish(true, &f);
    EXPECT_EQ(f.reason(), v1::FINISH_REASON_TOOL_CALLS);
    f.set_reason(reason);
    MarkToolCallsFinish(false, &f);
    EXPECT_EQ(f.reason(), reason);
  }
  for (v1::FinishReason reason :
       {v1::FINISH_REASON_LENGTH, v1::FINISH_REASON_CANCELLED,
        v1::FINISH_REASON_ERROR}) {
    v1::Finished f;
    f.set_reason(reason);
    MarkToolCallsFinish(true, &f);
    EXPECT_EQ(f.reason(), reason);
  }
}

}  // namespace
}  // namespace paceline::server
