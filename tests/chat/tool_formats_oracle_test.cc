// Every template of ../shared/chat_templates that renders an assistant
// turn's tool calls is the oracle for its format: jinja2 renders the turn,
// the turn's text goes to ChatOutputParser as model output (whole, a byte
// at a time, in random splits), and the parser must give back the calls the
// conversation held (names, arguments JSON-equal), and the content and
// reasoning where the template rendered them. A template that renders
// calls and does not round-trip must be listed in kKnownGaps with why.
// The test prints one markdown row per template.

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chat/output_parser.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/chat/output_collect.h"
#include "tests/testing/chat_template_reference.h"
#include "tests/testing/files.h"

namespace paceline::chat {
namespace {

using chat_test::Collected;
using json = nlohmann::ordered_json;

constexpr absl::string_view kSaid = "Let me look.";
constexpr absl::string_view kThought = "Need the weather.";

// The conversations' assistant calls, one scenario each.
const std::vector<std::pair<std::string, json>>& Scenarios() {
  static const auto* scenarios = new std::vector<std::pair<std::string, json>>{
      {"one call", json::parse(R"([{"name": "get_weather",
          "arguments": {"city": "Paris", "days": 3}}])")},
      {"two parallel calls", json::parse(R"([
          {"name": "get_weather", "arguments": {"city": "Paris"}},
          {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}])")},
      {"nested arguments", json::parse(R"([{"name": "search", "arguments": {
          "query": "flights", "filters": {"tags": ["a", "b"],
          "range": {"min": 1, "max": 2.5}}}}])")},
      {"unicode", json::parse(R"([{"name": "translate", "arguments": {
          "text": "Zürich °C \"quoted\" 日本語 😀", "lang": "de"}}])")},
  };
  return *scenarios;
}

const json& Tools() {
  static const json* tools = new json(json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "description": "Weather", "parameters": {"type": "object", "properties":
      {"city": {"type": "string", "description": "d"}, "days": {"type": "integer", "description": "d"}}}}},
    {"type": "function", "function": {"name": "get_time",
      "description": "Time", "parameters": {"type": "object", "properties":
      {"tz": {"type": "string", "description": "d"}}}}},
    {"type": "function", "function": {"name": "search",
      "description": "Search", "parameters": {"type": "object", "properties":
      {"query": {"type": "string", "description": "d"}, "filters": {"type": "object", "description": "d"}}}}},
    {"type": "function", "function": {"name": "translate",
      "description": "Translate", "parameters": {"type": "object",
      "properties": {"text": {"type": "string", "description": "d"},
      "lang": {"type": "string", "description": "d"}}}}}])"));
  return *tools;
}

// Templates that render calls the parser cannot give back, with why
// ("*": every scenario).
const std::map<std::pair<std::string, std::string>, std::string>& KnownGaps() {
  static const auto* gaps =
      new std::map<std::pair<std::string, std::string>, std::string>{
          {{"Apertus-8B-Instruct.jinja", "*"},
           "calls are `{\"NAME\": {args}}` (the name a key): not read"},
          {{"LFM2.5-8B-A1B.jinja", "*"},
           "pythonic calls `[f(a='x')]`: not read"},
          {{"MiniMax-M3.jinja", "*"},
           "arguments as nested XML elements per key: not read"},
          {{"google-gemma-4-31B-it.jinja", "*"},
           "Gemma 4's own `call:NAME{k:<|\"|>v<|\"|>}` syntax: not read"},
          {{"google-gemma-4-31B-it-interleaved.jinja", "*"},
           "Gemma 4's own `call:NAME{k:<|\"|>v<|\"|>}` syntax: not read"},
          {{"GigaChat3-10B-A1.8B.jinja", "*"},
           "the call is a separate `function call` message: not read"},
          {{"NVIDIA-Nemotron-Nano-v2.jinja", "*"},
           "renders the content and the calls as two assistant turns"},
          {{"Apriel-1.6-15b-Thinker-fixed.jinja", "*"},
           "reasoning has no open marker and ends at `[BEGIN FINAL "
           "RESPONSE]`: it comes out as content"},
          {{"ByteDance-Seed-OSS.jinja", "nested arguments"},
           "the template writes an object argument as a Python repr"},
          {{"openbmb-MiniCPM5-1B.jinja", "nested arguments"},
           "the template writes an object argument as a Python repr"},
      };
  return *gaps;
}

std::string ReadTemplate(const std::string& file) {
  return testing::ReadFile(testing::kChatTemplateDir + "/" + file);
}

json Request(const std::string& source, json messages, bool generation) {
  json context = {{"messages", std::move(messages)},
                  {"add_generation_prompt", generation},
                  {"bos_token", "<s>"},
                  {"eos_token", "</s>"},
                  {"tools", Tools()}};
  return {{"template", source}, {"context", std::move(context)}};
}

json User() { return {{"role", "user"}, {"content", "Weather?"}}; }

// The assistant turn with `calls` (arguments as objects, or as JSON text
// for the templates that want it so).
json Assistant(const json& calls, bool string_arguments) {
  json tool_calls = json::array();
  int n = 0;
  for (const json& call : calls) {
    json arguments = call["arguments"];
    if (string_arguments) arguments = arguments.dump();
    tool_calls.push_back(
        {{"id", absl::StrCat("call", n, "abcd")},  // Mistral's: 9 alnums
         {"type", "function"},
         {"function", {{"name", call["name"]}, {"arguments", arguments}}}});
    ++n;
  }
  return {{"role", "assistant"},
          {"content", kSaid},
          {"reasoning_content", kThought},
          {"tool_calls", tool_calls}};
}

size_t CommonPrefix(absl::string_view a, absl::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// What one template gave the test: its renders, in request order.
struct Renders {
  json before;      // the user turn
  json generation;  // the user turn and the generation prompt
  json plain;       // a plain assistant answer between two user turns
  std::vector<json> scenario;  // per scenario: arguments as objects
  std::vector<json> as_text;   // per scenario: arguments as JSON text
};

std::string Text(const json& answer) {
  return answer.value("ok", false) ? answer["text"].get<std::string>() : "";
}

// The model output in `turn_render`: the text after the part the user turn
// and the generation prompt share with it, up to the end-of-turn marker a
// plain answer shows after the last of `calls`' names. `opened`: the
// prompt up to the output.
std::string ModelOutput(const Renders& r, const std::string& turn_render,
                        const json& calls, std::string* opened) {
  const std::string before = Text(r.before);
  const std::string generation = Text(r.generation);
  size_t start = CommonPrefix(turn_render, before);
  if (start == before.size() && absl::StartsWith(generation, before)) {
    size_t shared = CommonPrefix(absl::string_view(turn_render).substr(start),
                                 absl::string_view(generation).substr(start));
    // A generation prompt shared in part: back to the end of a marker or
    // line, not into one (`<｜Assistant｜><think>` vs `...｜></think>`).
    if (start + shared < generation.size()) {
      absl::string_view part =
          absl::string_view(turn_render).substr(start, shared);
      size_t cut = part.find_last_of(">\n");
      shared = cut == absl::string_view::npos ? 0 : cut + 1;
    }
    start += shared;
  }
  std::string turn = turn_render.substr(start);
  *opened = turn_render.substr(0, start);
  // What follows the user turn in `before` (a closing system prompt).
  if (start <= before.size()) {
    std::string rest = before.substr(std::min(start, before.size()));
    if (!rest.empty() && absl::EndsWith(turn, rest)) {
      turn.resize(turn.size() - rest.size());
    }
  }
  const std::string plain = Text(r.plain);
  size_t said = absl::string_view(plain).rfind(kSaid);
  if (said == std::string::npos) return turn;
  // The first marker after a plain answer that the turn holds (Command
  // R's `<|END_RESPONSE|><|END_OF_TURN_TOKEN|>`), or Llama's end of a
  // call message.
  absl::string_view end = absl::string_view(plain).substr(said + kSaid.size());
  std::vector<absl::string_view> markers = {"<|eom_id|>"};
  absl::string_view first = absl::StripLeadingAsciiWhitespace(end);
  first = first.substr(0, std::min(first.find_first_of(" \n<", 1), size_t{64}));
  if (!first.empty()) markers.insert(markers.begin(), first);
  // The first two markers: an end of turn is one of them.
  for (size_t at = end.find('<');
       at != absl::string_view::npos && at < 200 && markers.size() < 4;
       at = end.find('<', at + 1)) {
    size_t close = end.find('>', at);
    if (close == absl::string_view::npos) break;
    markers.insert(markers.begin() + markers.size() - 1,
                   end.substr(at, close + 1 - at));
  }
  // Cut after the calls: a template may write the content as a turn of
  // its own after them (R1), or end a part before them (gpt-oss).
  size_t calls_end = 0;
  for (const json& call : calls) {
    size_t at = absl::string_view(turn).rfind(call["name"].get<std::string>());
    if (at != std::string::npos) calls_end = std::max(calls_end, at);
  }
  for (absl::string_view marker : markers) {
    size_t at = absl::string_view(turn).find(marker, calls_end);
    if (at != std::string::npos) {
      turn.resize(at);
      break;
    }
  }
  return turn;
}

struct Outcome {
  bool renders_calls = false;
  bool pass = false;
  std::string why;  // when it does not pass
};

// The calls of `calls` the output holds (a template may render only some).
json RenderedCalls(const json& calls, const std::string& output) {
  json rendered = json::array();
  for (const json& call : calls) {
    if (absl::StrContains(output, call["name"].get<std::string>())) {
      rendered.push_back(call);
    }
  }
  return rendered;
}

// Why `got` is not `calls`, the content and the reasoning; "" if it is.
std::string Mismatch(const Collected& got, const json& calls,
                     const std::string& output, bool said_as_reasoning) {
  if (got.calls.size() != calls.size()) {
    return absl::StrCat(got.calls.size(), " calls, not ", calls.size());
  }
  for (size_t k = 0; k < calls.size(); ++k) {
    if (got.calls[k].name != calls[k]["name"].get<std::string>()) {
      return "name " + got.calls[k].name;
    }
    json arguments = json::parse(got.calls[k].arguments, nullptr, false);
    if (arguments != calls[k]["arguments"]) {
      return "arguments " + got.calls[k].arguments;
    }
  }
  if (!got.broken.empty() || !got.saw_tool_calls) return "broken calls";
  std::string said = absl::StrContains(output, kSaid) ? std::string(kSaid) : "";
  std::string thought =
      absl::StrContains(output, kThought) ? std::string(kThought) : "";
  if (said_as_reasoning) std::swap(said, thought);
  // Whitespace around the content is the template's.
  if (absl::StripAsciiWhitespace(got.content) != said) {
    return "content " + got.content;
  }
  if (got.reasoning != thought) return "reasoning " + got.reasoning;
  return "";
}

// Parses `output` whole, a byte at a time and in random splits, with and
// without the tools' parameter types; "" when every way gives `calls`.
std::string RoundTrip(ChatOutputFormat format, const std::string& output,
                      const json& calls) {
  // gpt-oss writes an assistant's content with calls in its analysis
  // channel: that is reasoning.
  const bool said_as_reasoning = format.tool_calls == ToolCallFormat::kHarmony;
  for (int typed = 0; typed < 2; ++typed) {
    if (typed) {
      format.parameter_types = std::make_shared<ToolParameterTypes>(
          ToolParameterTypes::FromTools(Tools()));
    }
    std::vector<std::vector<std::string>> splits = {{output},
                                                    chat_test::Bytes(output)};
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      splits.push_back(chat_test::RandomSplit(output, seed));
    }
    for (const auto& pieces : splits) {
      Collected got = chat_test::Feed(format, pieces);
      std::string why = Mismatch(got, calls, output, said_as_reasoning);
      if (!why.empty()) {
        return absl::StrCat(why, typed ? " (typed)" : "", " in ", pieces.size(),
                            " pieces");
      }
    }
  }
  return "";
}

Outcome Check(const std::string& source, const Renders& r, size_t s) {
  Outcome outcome;
  const json& calls = Scenarios()[s].second;
  const json& answer =
      r.scenario[s].value("ok", false) ? r.scenario[s] : r.as_text[s];
  if (!answer.value("ok", false)) {
    outcome.why = "raises: " + answer.value("error", std::string());
    return outcome;
  }
  std::string opened;
  std::string output = ModelOutput(r, Text(answer), calls, &opened);
  json rendered = RenderedCalls(calls, output);
  if (rendered.empty()) {
    outcome.why = "renders no assistant tool calls";
    return outcome;
  }
  outcome.renders_calls = true;
  ChatOutputFormat format = DetectChatOutputFormat(source);
  // A turn that starts by closing reasoning it never opened: the template
  // wrote thinking off into the prompt.
  if (!format.reasoning_close.empty() &&
      absl::StartsWith(output, format.reasoning_close)) {
    opened += format.reasoning_close;
    output.erase(0, format.reasoning_close.size());
  }
  format.starts_in_reasoning = PromptOpensReasoning(opened, format);
  format.starts_in_tool_calls = PromptOpensToolCalls(opened, format);
  outcome.why = RoundTrip(format, output, rendered);
  outcome.pass = outcome.why.empty();
  if (!outcome.pass) outcome.why += " | output: " + output;
  return outcome;
}

std::vector<std::string> TemplateFiles() {
  std::vector<std::string> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::kChatTemplateDir)) {
    std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, ".jinja")) files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ToolFormatsOracleTest, EveryTemplateThatRendersCallsRoundTrips) {
  std::string unavailable = testing::ReferenceUnavailable();
  if (!unavailable.empty()) GTEST_SKIP() << unavailable;
  const std::vector<std::string> files = TemplateFiles();
  ASSERT_GE(files.size(), 60u);
  const size_t n = Scenarios().size();
  std::vector<json> requests;
  for (const std::string& file : files) {
    const std::string source = ReadTemplate(file);
    json plain = {{"role", "assistant"}, {"content", kSaid}};
    // json::array, not {User()}: a braced list of one json is an array
    // under one compiler and a copy of the element under another (GCC's
    // build passed, Clang's ASan build sent the object alone).
    requests.push_back(Request(source, json::array({User()}), false));
    requests.push_back(Request(source, json::array({User()}), true));
    requests.push_back(Request(source, {User(), plain, User()}, false));
    for (size_t s = 0; s < n; ++s) {
      for (bool text : {false, true}) {
        requests.push_back(Request(
            source, {User(), Assistant(Scenarios()[s].second, text)}, false));
      }
    }
  }
  absl::StatusOr<std::vector<json>> answers = testing::RunReference(requests);
  ASSERT_TRUE(answers.ok()) << answers.status();
  ASSERT_EQ(answers->size(), requests.size());

  int rendering = 0;
  int passing = 0;
  std::vector<std::string> rows;
  size_t next = 0;
  for (const std::string& file : files) {
    Renders r;
    r.before = (*answers)[next++];
    r.generation = (*answers)[next++];
    r.plain = (*answers)[next++];
    for (size_t s = 0; s < n; ++s) {
      r.scenario.push_back((*answers)[next++]);
      r.as_text.push_back((*answers)[next++]);
    }
    const std::string source = ReadTemplate(file);
    bool renders = false;
    bool pass = true;
    std::vector<std::string> notes;
    for (size_t s = 0; s < n; ++s) {
      const std::string& scenario = Scenarios()[s].first;
      Outcome o = Check(source, r, s);
      renders |= o.renders_calls;
      if (o.pass || !o.renders_calls) {
        if (!o.renders_calls) notes.push_back(scenario + ": " + o.why);
        continue;
      }
      auto gap = KnownGaps().find({file, scenario});
      if (gap == KnownGaps().end()) gap = KnownGaps().find({file, "*"});
      pass = false;
      if (gap != KnownGaps().end()) {
        notes.push_back(scenario + ": " + gap->second);
      } else {
        ADD_FAILURE() << file << ", " << scenario << ": " << o.why;
        notes.push_back(scenario + ": FAILS");
      }
    }
    const std::string format(
        ToolCallFormatName(DetectChatOutputFormat(source).tool_calls));
    if (renders) {
      ++rendering;
      if (pass) ++passing;
    }
    std::string result = !renders ? "renders no calls"
                         : pass   ? "pass"
                                  : "listed";
    std::string detail = notes.empty() ? "" : absl::StrJoin(notes, "; ");
    for (char& c : detail) {
      if (c == '|' || c == '\n') c = ' ';
    }
    rows.push_back(absl::StrCat("| ", file, " | ", format, " | ", result,
                                detail.empty() ? "" : ": " + detail, " |"));
  }
  std::cout << "| template | detected format | round trip |\n|---|---|---|\n"
            << absl::StrJoin(rows, "\n") << "\n\n"
            << files.size() << " templates, " << rendering
            << " render assistant tool calls, " << passing
            << " round-trip every scenario\n";
}

}  // namespace
}  // namespace paceline::chat
