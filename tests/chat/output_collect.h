#ifndef PACELINE_TESTS_CHAT_OUTPUT_COLLECT_H_
#define PACELINE_TESTS_CHAT_OUTPUT_COLLECT_H_

// What the chat output tests share: a client's view of all the deltas of
// one output, and feeding an output to the parser in different splits.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "chat/output_parser.h"

namespace paceline::chat::chat_test {

struct Call {
  std::string id;
  std::string name;
  std::string arguments;
};

// What a client assembles from all the deltas of one output.
struct Collected {
  std::string content;
  std::string reasoning;
  std::vector<Call> calls;  // by index
  std::vector<int> broken;
  bool saw_tool_calls = false;

  bool operator==(const Collected& o) const;
};
std::ostream& operator<<(std::ostream& os, const Collected& c);

// Adds one delta, checking the streaming contract (gtest failures): a
// call's first delta has its id and name, later ones neither; indices go
// 0, 1, ...
void Add(const ChatOutputDelta& delta, Collected& c);

// Pushes the pieces to a parser (id seed 7), then Finish.
Collected Feed(const ChatOutputFormat& format,
               const std::vector<std::string>& pieces);

std::vector<std::string> Bytes(const std::string& text);
// Random pieces of 0 to 9 bytes (empty pushes included).
std::vector<std::string> RandomSplit(const std::string& text, uint32_t seed);

// Parses `text` whole, a byte at a time and in 8 random splits; all must
// agree. Returns what the whole text gave.
Collected Parse(const ChatOutputFormat& format, const std::string& text);

// `think`: the <think> markers.
ChatOutputFormat Format(ToolCallFormat tools, bool think = false,
                        bool starts_in_reasoning = false);

// The call's arguments are a JSON object equal to `expected`.
void ExpectArguments(const Call& call, const std::string& expected);

}  // namespace paceline::chat::chat_test

#endif  // PACELINE_TESTS_CHAT_OUTPUT_COLLECT_H_
