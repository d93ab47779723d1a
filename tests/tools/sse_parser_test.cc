// SseParser against the WHATWG HTML standard's text/event-stream rules and
// its worked examples (§9.2.6 "Interpreting an event stream", §9.2.5
// "Parsing an event stream"), fed whole, byte by byte, and split at every
// point.

#include "tools/paceline/sse_parser.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace paceline::tools {
namespace {

using std::string_literals::operator""s;

// Everything `stream` dispatches when fed in the given pieces.
std::vector<SseEvent> Parse(const std::vector<std::string>& pieces) {
  SseParser parser;
  std::vector<SseEvent> events;
  for (const std::string& p : pieces) {
    EXPECT_TRUE(parser.Feed(p, &events).ok());
  }
  return events;
}

std::vector<SseEvent> ParseWhole(const std::string& stream) {
  return Parse({stream});
}

std::vector<SseEvent> ParseBytewise(const std::string& stream) {
  std::vector<std::string> pieces;
  for (char c : stream) pieces.push_back(std::string(1, c));
  return Parse(pieces);
}

std::vector<std::string> Data(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const SseEvent& e : events) out.push_back(e.data);
  return out;
}

// The standard's examples and what it says they dispatch.
struct Example {
  std::string stream;
  std::vector<std::string> data;
};

const std::vector<Example>& Examples() {
  static const auto* examples = new std::vector<Example>{
      // "the data ... would be YHOO\n+2\n10"
      {"data: YHOO\ndata: +2\ndata: 10\n\n", {"YHOO\n+2\n10"}},
      // first event, second event, " third event" (one space dropped).
      {": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n"
       "\ndata:  third event\n\n",
       {"first event", "second event", " third event"}},
      // "" and "\n"; the last block has no blank line and is discarded.
      {"data\n\ndata\ndata\n\ndata:", {"", "\n"}},
      // Both "test": the space after the colon is optional.
      {"data:test\n\ndata: test\n\n", {"test", "test"}},
  };
  return *examples;
}

TEST(SseParserTest, StandardExamples) {
  for (const Example& ex : Examples()) {
    SCOPED_TRACE(ex.stream);
    EXPECT_EQ(Data(ParseWhole(ex.stream)), ex.data);
    EXPECT_EQ(Data(ParseBytewise(ex.stream)), ex.data);
  }
}

TEST(SseParserTest, EveryTwoPieceSplitGivesTheSameEvents) {
  for (const Example& ex : Examples()) {
    for (size_t i = 0; i <= ex.stream.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(Data(Parse({ex.stream.substr(0, i), ex.stream.substr(i)})),
                ex.data);
    }
  }
}

TEST(SseParserTest, IdsAndTypes) {
  // The second example: the first event's last event id is "1", the
  // second's is "" (an `id` line with no value resets it).
  const std::vector<SseEvent> e = ParseWhole(Examples()[1].stream);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].id, "1");
  EXPECT_EQ(e[1].id, "");
  EXPECT_EQ(e[0].type, "message");
  const std::vector<SseEvent> t = ParseWhole(
      "event: add\nid: 9\ndata: x\n\ndata: y\n\nevent: gone\n\n"
      "data: z\n\n");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].type, "add");
  EXPECT_EQ(t[1].type, "message");  // the type lasts one event
  EXPECT_EQ(t[1].id, "9");          // the last event id persists
  EXPECT_EQ(t[2].type, "message");  // a block without data resets it
  // An id holding NUL is ignored; retry and unknown fields too.
  const std::vector<SseEvent> n =
      ParseWhole("id: 5\ndata: a\n\nid: 6\0x\nretry: 10\nfoo: b\ndata: c\n\n"s);
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[1].id, "5");
  EXPECT_EQ(n[1].data, "c");
}

TEST(SseParserTest, LineEndsCrLfAndCr) {
  const std::string stream =
      "data: a\r\ndata: b\r\n\r\ndata: c\r\rdata: d\n\r\n";
  const std::vector<std::string> want = {"a\nb", "c", "d"};
  EXPECT_EQ(Data(ParseWhole(stream)), want);
  EXPECT_EQ(Data(ParseBytewise(stream)), want);
  // A CRLF split between pieces is one line end, not a blank line.
  EXPECT_EQ(Data(Parse({"data: a\r", "\ndata: b\r", "\n\r", "\n"})),
            std::vector<std::string>({"a\nb"}));
}

TEST(SseParserTest, CoalescedEventsInOnePiece) {
  std::string stream;
  std::vector<std::string> want;
  for (int i = 0; i < 50; ++i) {
    stream += ": ping\ndata: {\"i\": " + std::to_string(i) + "}\n\n";
    want.push_back("{\"i\": " + std::to_string(i) + "}");
  }
  EXPECT_EQ(Data(ParseWhole(stream)), want);
}

TEST(SseParserTest, ByteOrderMarkOnlyAtTheStart) {
  const std::string bom = "\xEF\xBB\xBF";
  EXPECT_EQ(Data(ParseWhole(bom + "data: a\n\n")),
            std::vector<std::string>({"a"}));
  EXPECT_EQ(Data(ParseBytewise(bom + "data: a\n\n")),
            std::vector<std::string>({"a"}));
  // Later, it is part of a field name ("\xEF\xBB\xBF" "data"): ignored.
  EXPECT_EQ(Data(ParseWhole("data: a\n\n" + bom + "data: b\n\n")),
            std::vector<std::string>({"a"}));
}

TEST(SseParserTest, BoundedLinesAndData) {
  SseParser parser(/*max_bytes=*/16);
  std::vector<SseEvent> events;
  EXPECT_TRUE(parser.Feed("data: 0123456789\n\n", &events).ok());
  ASSERT_EQ(events.size(), 1u);
  // A line that never ends, past the bound.
  const absl::Status s = parser.Feed("data: 0123456789abcdef", &events);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(parser.Feed("\n\n", &events).code(),
            absl::StatusCode::kResourceExhausted);  // failed for good
  // Data past the bound over several short lines.
  SseParser lines(/*max_bytes=*/16);
  EXPECT_EQ(
      lines.Feed("data: 01234\ndata: 56789\ndata: abcdef\n", &events).code(),
      absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(events.size(), 1u);
}

}  // namespace
}  // namespace paceline::tools
