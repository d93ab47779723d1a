#include "tests/chat/output_collect.h"

#include <algorithm>
#include <random>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace paceline::chat::chat_test {

using json = nlohmann::ordered_json;

bool Collected::operator==(const Collected& o) const {
  auto same = [](const Call& a, const Call& b) {
    return a.id == b.id && a.name == b.name && a.arguments == b.arguments;
  };
  return content == o.content && reasoning == o.reasoning &&
         broken == o.broken && saw_tool_calls == o.saw_tool_calls &&
         std::equal(calls.begin(), calls.end(), o.calls.begin(), o.calls.end(),
                    same);
}

std::ostream& operator<<(std::ostream& os, const Collected& c) {
  os << "{content="
     << json(c.content).dump(-1, ' ', false, json::error_handler_t::replace)
     << " reasoning="
     << json(c.reasoning).dump(-1, ' ', false, json::error_handler_t::replace)
     << " calls=[";
  for (const Call& call : c.calls) {
    os << "(" << call.id << " " << call.name << " " << call.arguments << ")";
  }
  os << "] broken=" << c.broken.size() << " saw=" << c.saw_tool_calls << "}";
  return os;
}

void Add(const ChatOutputDelta& delta, Collected& c) {
  c.content += delta.content;
  c.reasoning += delta.reasoning;
  int previous = -1;
  for (const ChatToolCallDelta& d : delta.tool_calls) {
    EXPECT_GT(d.index, previous) << "one entry per call, in index order";
    previous = d.index;
    ASSERT_LE(d.index, static_cast<int>(c.calls.size()));
    if (d.index == static_cast<int>(c.calls.size())) {
      EXPECT_FALSE(d.id.empty());
      EXPECT_FALSE(d.name.empty());
      c.calls.push_back({d.id, d.name, ""});
    } else {
      EXPECT_TRUE(d.id.empty() && d.name.empty()) << d.index;
    }
    c.calls[d.index].arguments += d.arguments;
  }
  for (int index : delta.broken_tool_calls) {
    EXPECT_LT(index, static_cast<int>(c.calls.size()));
    c.broken.push_back(index);
  }
}

Collected Feed(const ChatOutputFormat& format,
               const std::vector<std::string>& pieces) {
  ChatOutputParser parser(format, /*id_seed=*/7);
  Collected c;
  for (const std::string& piece : pieces) Add(parser.Push(piece), c);
  Add(parser.Finish(), c);
  c.saw_tool_calls = parser.saw_tool_calls();
  return c;
}

std::vector<std::string> Bytes(const std::string& text) {
  std::vector<std::string> pieces;
  for (char ch : text) pieces.emplace_back(1, ch);
  return pieces;
}

std::vector<std::string> RandomSplit(const std::string& text, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> length(0, 9);
  std::vector<std::string> pieces;
  for (size_t at = 0; at < text.size();) {
    size_t n = std::min(length(rng), text.size() - at);
    pieces.push_back(text.substr(at, n));
    at += n;
  }
  return pieces;
}

Collected Parse(const ChatOutputFormat& format, const std::string& text) {
  Collected whole = Feed(format, {text});
  EXPECT_EQ(Feed(format, Bytes(text)), whole) << "byte by byte: " << text;
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    EXPECT_EQ(Feed(format, RandomSplit(text, seed)), whole)
        << "split seed " << seed << ": " << text;
  }
  return whole;
}

ChatOutputFormat Format(ToolCallFormat tools, bool think,
                        bool starts_in_reasoning) {
  ChatOutputFormat format;
  if (think) {
    format.reasoning_open = "<think>";
    format.reasoning_close = "</think>";
  }
  format.starts_in_reasoning = starts_in_reasoning;
  format.tool_calls = tools;
  return format;
}

void ExpectArguments(const Call& call, const std::string& expected) {
  json got = json::parse(call.arguments, nullptr, false);
  ASSERT_FALSE(got.is_discarded()) << call.arguments;
  EXPECT_TRUE(got.is_object());
  EXPECT_EQ(got, json::parse(expected)) << call.arguments;
}

}  // namespace paceline::chat::chat_test
