// libFuzzer target for the chat output parser (chat/output_parser.h) over
// every ToolCallFormat: byte 0 picks the format, byte 1 the options
// (<think> markers, starting in reasoning, the tools' parameter types),
// byte 2 how the rest is split into pushes. The rest is the model's
// output. The parser must not crash, and what the client assembles must
// not depend on the split (the parser's contract): the whole text pushed
// at once and the split one must give the same content, reasoning and
// calls, or the target aborts.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "chat/output_parser.h"
#include "nlohmann/json.hpp"

namespace {

using paceline::chat::ChatOutputDelta;
using paceline::chat::ChatOutputFormat;
using paceline::chat::ChatOutputParser;
using paceline::chat::ToolCallFormat;
using paceline::chat::ToolParameterTypes;

struct Assembled {
  std::string content;
  std::string reasoning;
  std::vector<std::string> names;
  std::vector<std::string> arguments;
  std::vector<int> broken;

  void Add(const ChatOutputDelta& d) {
    content += d.content;
    reasoning += d.reasoning;
    for (const auto& call : d.tool_calls) {
      if (call.index >= static_cast<int>(names.size())) {
        names.resize(call.index + 1);
        arguments.resize(call.index + 1);
      }
      names[call.index] += call.name;
      arguments[call.index] += call.arguments;
    }
    broken.insert(broken.end(), d.broken_tool_calls.begin(),
                  d.broken_tool_calls.end());
  }
  bool operator==(const Assembled& o) const {
    return content == o.content && reasoning == o.reasoning &&
           names == o.names && arguments == o.arguments && broken == o.broken;
  }
};

const std::shared_ptr<const ToolParameterTypes>& Types() {
  static const auto* types = new std::shared_ptr<const ToolParameterTypes>(
      std::make_shared<ToolParameterTypes>(
          ToolParameterTypes::FromTools(nlohmann::ordered_json::parse(R"([
        {"type": "function", "function": {"name": "get_weather",
         "parameters": {"properties": {"city": {"type": "string"},
                                       "days": {"type": "integer"}}}}}])"))));
  return *types;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3 || size > (1 << 16)) return 0;
  constexpr int kFormats = static_cast<int>(ToolCallFormat::kHarmony) + 1;
  ChatOutputFormat format;
  format.tool_calls = static_cast<ToolCallFormat>(data[0] % kFormats);
  if (data[1] & 1) {
    format.reasoning_open = "<think>";
    format.reasoning_close = "</think>";
    format.starts_in_reasoning = (data[1] & 2) != 0;
  }
  if (data[1] & 4) format.parameter_types = Types();
  const size_t step = 1 + data[2] % 7;
  const absl::string_view text(reinterpret_cast<const char*>(data) + 3,
                               size - 3);

  Assembled whole;
  {
    ChatOutputParser parser(format);
    whole.Add(parser.Push(text));
    whole.Add(parser.Finish());
  }
  Assembled split;
  {
    ChatOutputParser parser(format);
    for (size_t at = 0; at < text.size(); at += step) {
      split.Add(parser.Push(text.substr(at, step)));
    }
    split.Add(parser.Finish());
  }
  if (!(whole == split)) std::abort();  // the split changed the answer
  return 0;
}
