#include "engine/tokenizer/chat_output.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/tokenizer/unicode.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/files.h"
#include "tests/testing/run_command.h"

namespace paceline::engine {
namespace {

using json = nlohmann::ordered_json;

constexpr char kTemplates[] = PACELINE_SHARED_DIR "/chat_templates/";

// What a client assembles from all the deltas of one output.
struct Call {
  std::string id;
  std::string name;
  std::string arguments;
};
struct Collected {
  std::string content;
  std::string reasoning;
  std::vector<Call> calls;  // by index
  std::vector<int> broken;
  bool saw_tool_calls = false;

  bool operator==(const Collected& o) const {
    auto same = [](const Call& a, const Call& b) {
      return a.id == b.id && a.name == b.name && a.arguments == b.arguments;
    };
    return content == o.content && reasoning == o.reasoning &&
           broken == o.broken && saw_tool_calls == o.saw_tool_calls &&
           std::equal(calls.begin(), calls.end(), o.calls.begin(),
                      o.calls.end(), same);
  }
};

std::ostream& operator<<(std::ostream& os, const Collected& c) {
  os << "{content=" << json(c.content).dump()
     << " reasoning=" << json(c.reasoning).dump() << " calls=[";
  for (const Call& call : c.calls) {
    os << "(" << call.id << " " << call.name << " " << call.arguments << ")";
  }
  os << "] broken=" << c.broken.size() << " saw=" << c.saw_tool_calls << "}";
  return os;
}

// Adds one delta, checking the streaming contract: a call's first delta
// has its id and name, later ones neither; indices go 0, 1, ...
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

// Random pieces of 0 to 9 bytes (empty pushes included).
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

// Parses `text` whole, a byte at a time and in random splits; all must
// agree. Returns what the whole text gave.
Collected Parse(const ChatOutputFormat& format, const std::string& text) {
  Collected whole = Feed(format, {text});
  EXPECT_EQ(Feed(format, Bytes(text)), whole) << "byte by byte: " << text;
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    EXPECT_EQ(Feed(format, RandomSplit(text, seed)), whole)
        << "split seed " << seed << ": " << text;
  }
  return whole;
}

ChatOutputFormat Format(ToolCallFormat tools, bool think = false,
                        bool starts_in_reasoning = false) {
  ChatOutputFormat format;
  if (think) {
    format.reasoning_open = "<think>";
    format.reasoning_close = "</think>";
  }
  format.starts_in_reasoning = starts_in_reasoning;
  format.tool_calls = tools;
  return format;
}

// The arguments are a JSON object equal to `expected`.
void ExpectArguments(const Call& call, const std::string& expected) {
  json got = json::parse(call.arguments, nullptr, false);
  ASSERT_FALSE(got.is_discarded()) << call.arguments;
  EXPECT_TRUE(got.is_object());
  EXPECT_EQ(got, json::parse(expected)) << call.arguments;
}

// --- Reasoning ---------------------------------------------------------

TEST(ChatOutputTest, Qwen3ThinkingThenContent) {
  Collected c = Parse(Format(ToolCallFormat::kHermes, true),
                      "<think>\nThe user says hi.\nBe brief.\n</think>\n\n"
                      "Hello! How can I help?");
  EXPECT_EQ(c.reasoning, "The user says hi.\nBe brief.");
  EXPECT_EQ(c.content, "Hello! How can I help?");
  EXPECT_TRUE(c.calls.empty());
  EXPECT_FALSE(c.saw_tool_calls);
}

TEST(ChatOutputTest, EmptyThinkBlockAndNoThinkBlock) {
  ChatOutputFormat format = Format(ToolCallFormat::kNone, true);
  Collected empty = Parse(format, "<think>\n\n</think>\n\nJust this.");
  EXPECT_EQ(empty.reasoning, "");
  EXPECT_EQ(empty.content, "Just this.");
  Collected none = Parse(format, "No thoughts <think>here</think>.");
  EXPECT_EQ(none.reasoning, "");
  EXPECT_EQ(none.content, "No thoughts <think>here</think>.");
}

TEST(ChatOutputTest, R1StartsInsideReasoning) {
  ChatOutputFormat format = Format(ToolCallFormat::kNone, true, true);
  Collected c = Parse(format,
                      "\nLet me add: 2 + 2.\n</think>\n\n"
                      "The answer is 4.");
  EXPECT_EQ(c.reasoning, "Let me add: 2 + 2.");
  EXPECT_EQ(c.content, "The answer is 4.");
  // The model opening the block again changes nothing.
  EXPECT_EQ(Parse(format,
                  " <think>\nLet me add: 2 + 2.\n</think>\n\n"
                  "The answer is 4."),
            c);
  // Cut before the close marker: all of it is reasoning.
  Collected cut = Parse(format, "Still thinking about </thi");
  EXPECT_EQ(cut.reasoning, "Still thinking about </thi");
  EXPECT_EQ(cut.content, "");
}

TEST(ChatOutputTest, ToolCallMarkersInsideReasoningAreReasoning) {
  Collected c = Parse(Format(ToolCallFormat::kHermes, true),
                      "<think>I could use <tool_call> here.</think>Fine.");
  EXPECT_EQ(c.reasoning, "I could use <tool_call> here.");
  EXPECT_EQ(c.content, "Fine.");
  EXPECT_TRUE(c.calls.empty());
}

TEST(ChatOutputTest, MistralThinkMarkers) {
  ChatOutputFormat format;
  format.reasoning_open = "[THINK]";
  format.reasoning_close = "[/THINK]";
  format.tool_calls = ToolCallFormat::kMistralArgs;
  Collected c = Parse(format,
                      "[THINK]Paris, so celsius.[/THINK]"
                      "[TOOL_CALLS]get_weather[ARGS]{\"city\": "
                      "\"Paris\"}");
  EXPECT_EQ(c.reasoning, "Paris, so celsius.");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_weather");
  ExpectArguments(c.calls[0], R"({"city": "Paris"})");
}

// --- Hermes ------------------------------------------------------------

TEST(ChatOutputTest, HermesSingleCall) {
  const std::string args = R"({"city": "Paris", "days": [1, 2]})";
  Collected c = Parse(Format(ToolCallFormat::kHermes),
                      "<tool_call>\n{\"name\": \"get_weather\", "
                      "\"arguments\": " +
                          args + "}\n</tool_call>");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_weather");
  EXPECT_EQ(c.calls[0].arguments, args);  // as written, whitespace kept
  EXPECT_TRUE(c.broken.empty());
  EXPECT_TRUE(c.saw_tool_calls);
}

TEST(ChatOutputTest, HermesParallelCallsWithContentAround) {
  Collected c =
      Parse(Format(ToolCallFormat::kHermes),
            "I'll look both up.\n<tool_call>\n{\"name\": \"get_weather\", "
            "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n"
            "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n"
            "</tool_call>\nOne moment.");
  EXPECT_EQ(c.content, "I'll look both up.One moment.");
  ASSERT_EQ(c.calls.size(), 2u);
  EXPECT_EQ(c.calls[0].name, "get_weather");
  ExpectArguments(c.calls[0], R"({"city": "Paris"})");
  EXPECT_EQ(c.calls[1].name, "get_time");
  ExpectArguments(c.calls[1], R"({"tz": "CET"})");
  EXPECT_NE(c.calls[0].id, c.calls[1].id);
  EXPECT_TRUE(c.saw_tool_calls);
}

TEST(ChatOutputTest, HermesArgumentsBeforeNameAndNoArguments) {
  Collected c =
      Parse(Format(ToolCallFormat::kHermes),
            "<tool_call>{\"arguments\": {\"q\": \"x\"}, \"name\": \"search\"}"
            "</tool_call><tool_call>{\"name\": \"now\"}</tool_call>");
  ASSERT_EQ(c.calls.size(), 2u);
  EXPECT_EQ(c.calls[0].name, "search");
  EXPECT_EQ(c.calls[0].arguments, R"({"q": "x"})");
  EXPECT_EQ(c.calls[1].name, "now");
  EXPECT_EQ(c.calls[1].arguments, "{}");
}

TEST(ChatOutputTest, HermesAfterThinking) {
  Collected c = Parse(Format(ToolCallFormat::kHermes, true),
                      "<think>\nNeed weather.\n</think>\n\n<tool_call>\n"
                      "{\"name\": \"get_weather\", \"arguments\": {}}\n"
                      "</tool_call>");
  EXPECT_EQ(c.reasoning, "Need weather.");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].arguments, "{}");
}

// --- Llama 3 -----------------------------------------------------------

TEST(ChatOutputTest, Llama3BareJsonCall) {
  Collected c = Parse(Format(ToolCallFormat::kLlama3),
                      "\n{\"name\": \"get_weather\", \"parameters\": "
                      "{\"city\": \"Paris\"}}");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_weather");
  EXPECT_EQ(c.calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_TRUE(c.saw_tool_calls);
}

TEST(ChatOutputTest, Llama3PythonTagAndSemicolons) {
  Collected c =
      Parse(Format(ToolCallFormat::kLlama3),
            "<|python_tag|>{\"name\": \"a\", \"arguments\": {\"x\": 1}}; "
            "{\"type\": \"function\", \"name\": \"b\", \"parameters\": {}}");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 2u);
  EXPECT_EQ(c.calls[0].name, "a");
  EXPECT_EQ(c.calls[0].arguments, R"({"x": 1})");
  EXPECT_EQ(c.calls[1].name, "b");
  EXPECT_EQ(c.calls[1].arguments, "{}");
}

TEST(ChatOutputTest, Llama3JsonThatIsNotACallIsContent) {
  const std::string text = R"({"answer": 42, "name": "x"})";
  Collected c = Parse(Format(ToolCallFormat::kLlama3), text);
  EXPECT_EQ(c.content, text);
  EXPECT_TRUE(c.calls.empty());
  EXPECT_FALSE(c.saw_tool_calls);
  // A call only opens the output; later JSON is content.
  const std::string later = "Here: {\"name\": \"f\", \"parameters\": {}}";
  EXPECT_EQ(Parse(Format(ToolCallFormat::kLlama3), later).content, later);
}

TEST(ChatOutputTest, Llama3BuiltinPythonCallIsContent) {
  const std::string text =
      "<|python_tag|>brave_search.call(query=\"weather Paris\")";
  Collected c = Parse(Format(ToolCallFormat::kLlama3), text);
  EXPECT_EQ(c.content, text);
  EXPECT_TRUE(c.calls.empty());
}

// --- Mistral -----------------------------------------------------------

TEST(ChatOutputTest, MistralJsonArray) {
  for (ToolCallFormat f :
       {ToolCallFormat::kMistral, ToolCallFormat::kMistralArgs}) {
    Collected c =
        Parse(Format(f),
              "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": "
              "{\"city\": \"Paris\"}, \"id\": \"abcDEF123\"}, {\"name\": "
              "\"get_time\", \"arguments\": {\"tz\": \"CET\"}}]");
    EXPECT_EQ(c.content, "");
    ASSERT_EQ(c.calls.size(), 2u);
    EXPECT_EQ(c.calls[0].name, "get_weather");
    EXPECT_EQ(c.calls[0].arguments, R"({"city": "Paris"})");
    EXPECT_EQ(c.calls[1].name, "get_time");
    EXPECT_EQ(c.calls[1].arguments, R"({"tz": "CET"})");
    for (const Call& call : c.calls) {
      EXPECT_EQ(call.id.size(), 9u) << call.id;  // what the templates demand
    }
  }
}

TEST(ChatOutputTest, MistralArgsFormWithAndWithoutCallId) {
  Collected c = Parse(
      Format(ToolCallFormat::kMistralArgs),
      "Checking.[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{\"city\": "
      "\"Paris\"}[TOOL_CALLS]get_time[ARGS] {\"tz\": \"CET\"}");
  EXPECT_EQ(c.content, "Checking.");
  ASSERT_EQ(c.calls.size(), 2u);
  EXPECT_EQ(c.calls[0].id, "abcDEF123");
  EXPECT_EQ(c.calls[0].name, "get_weather");
  EXPECT_EQ(c.calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(c.calls[1].name, "get_time");
  EXPECT_EQ(c.calls[1].arguments, R"({"tz": "CET"})");
  EXPECT_TRUE(c.saw_tool_calls);
}

TEST(ChatOutputTest, MistralMalformedHeaderIsContent) {
  for (const std::string text :
       {"[TOOL_CALLS]get weather[ARGS]{}", "[TOOL_CALLS][ARGS]{}",
        "[TOOL_CALLS]f[CALL_ID]x-y[ARGS]{}", "[TOOL_CALLS]f[ARGS]\"x\"",
        "[TOOL_CALLS]get_wea"}) {
    Collected c = Parse(Format(ToolCallFormat::kMistralArgs), text);
    EXPECT_EQ(c.content, text);
    EXPECT_FALSE(c.saw_tool_calls) << text;
  }
}

// --- Streaming ---------------------------------------------------------

TEST(ChatOutputTest, MarkerSplitAcrossPushesIsHeldBack) {
  ChatOutputParser parser(Format(ToolCallFormat::kHermes, true));
  EXPECT_TRUE(parser.Push("<thi").empty());
  EXPECT_TRUE(parser.Push("nk>").empty());
  EXPECT_EQ(parser.Push("Hmm.</th").reasoning, "Hmm.");
  EXPECT_TRUE(parser.Push("ink>").empty());
  EXPECT_EQ(parser.Push("Sure, a <").content, "Sure, a");
  EXPECT_EQ(parser.Push(" b").content, " < b");
  EXPECT_TRUE(parser.Push(" <tool").empty());
  EXPECT_TRUE(parser.Push("_call>").empty());
  ChatOutputDelta named = parser.Push("{\"name\": \"f\", \"arguments\": {\"a");
  ASSERT_EQ(named.tool_calls.size(), 1u);
  EXPECT_EQ(named.tool_calls[0].name, "f");
  EXPECT_EQ(named.tool_calls[0].arguments, "{\"a");
  EXPECT_EQ(named.content, "");
  ChatOutputDelta more = parser.Push("\": 1}}</tool_");
  ASSERT_EQ(more.tool_calls.size(), 1u);
  EXPECT_EQ(more.tool_calls[0].name, "");
  EXPECT_EQ(more.tool_calls[0].arguments, "\": 1}");
  EXPECT_TRUE(parser.saw_tool_calls());
  EXPECT_TRUE(parser.Push("call>").empty());
  EXPECT_TRUE(parser.Finish().empty());
}

TEST(ChatOutputTest, ArgumentsStreamAsTheyArrive) {
  ChatOutputParser parser(Format(ToolCallFormat::kHermes));
  // Before the name, nothing of the call goes out.
  EXPECT_TRUE(parser.Push("<tool_call>{\"arguments\": {\"q\": \"lo").empty());
  ChatOutputDelta named = parser.Push("ng\"}, \"name\": \"search\"");
  ASSERT_EQ(named.tool_calls.size(), 1u);
  EXPECT_EQ(named.tool_calls[0].name, "search");
  EXPECT_EQ(named.tool_calls[0].arguments, "{\"q\": \"long\"}");
  EXPECT_FALSE(parser.saw_tool_calls());  // the object is still open
  EXPECT_TRUE(parser.Push("}").empty());
  EXPECT_TRUE(parser.saw_tool_calls());
}

TEST(ChatOutputTest, TrailingMarkerPrefixAtFinishIsContent) {
  ChatOutputParser parser(Format(ToolCallFormat::kHermes));
  EXPECT_EQ(parser.Push("Bye <tool_ca").content, "Bye");
  EXPECT_EQ(parser.Finish().content, " <tool_ca");
}

TEST(ChatOutputTest, NoFormatPassesEverythingThrough) {
  const std::string text =
      "<think>x</think> <tool_call>{\"name\": \"f\"}</tool_call> "
      "[TOOL_CALLS] <|python_tag|>{\"name\": \"g\"}  \n";
  ChatOutputParser parser{ChatOutputFormat()};
  std::string content;
  for (const std::string& piece : RandomSplit(text, 11)) {
    ChatOutputDelta delta = parser.Push(piece);
    EXPECT_EQ(delta.content, piece);  // nothing held back
    content += delta.content;
  }
  EXPECT_TRUE(parser.Finish().empty());
  EXPECT_EQ(content, text);
  EXPECT_EQ(Parse(ChatOutputFormat(), text).content, text);
}

// --- Malformed and cut calls --------------------------------------------

TEST(ChatOutputTest, MalformedCallsAreContentByteForByte) {
  struct Case {
    ToolCallFormat format;
    std::string text;
    std::vector<int> broken;
  };
  const std::vector<Case> cases = {
      {ToolCallFormat::kHermes, "See <tool_call>hello</tool_call> ok", {}},
      {ToolCallFormat::kHermes,
       "<tool_call>{\"arguments\": {\"a\": 1}}</tool_call>",
       {}},
      {ToolCallFormat::kHermes, "<tool_call>{\"name\": 3}</tool_call>", {}},
      {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"\"}</tool_call>", {}},
      {ToolCallFormat::kHermes,
       "<tool_call>{\"name\": \"f\", \"colour\": 1}</tool_call>",
       {0}},
      {ToolCallFormat::kHermes,
       "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
       {0}},
      // Structure balances but is not JSON: found when the object closes.
      {ToolCallFormat::kHermes,
       "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1 2}}\n"
       "</tool_call>",
       {0}},
      {ToolCallFormat::kHermes,
       "<tool_call>{\"name\": \"f\", \"arguments\": {}, \"name\": \"g\"}",
       {0}},
      {ToolCallFormat::kLlama3, "{\"name\": \"f\", \"parameters\": {} ", {0}},
      {ToolCallFormat::kLlama3, "{\"name\": tru", {}},
      {ToolCallFormat::kMistral, "[TOOL_CALLS][7, {\"name\": \"f\"}]", {}},
  };
  for (const Case& c : cases) {
    Collected got = Parse(Format(c.format), c.text);
    EXPECT_EQ(got.content, c.text) << c.text;
    EXPECT_EQ(got.broken, c.broken) << c.text;
  }
}

TEST(ChatOutputTest, BrokenCallAfterACompleteOne) {
  Collected c = Parse(
      Format(ToolCallFormat::kHermes),
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": }}</tool_call>");
  ASSERT_EQ(c.calls.size(), 2u);
  EXPECT_EQ(c.calls[0].arguments, "{}");
  EXPECT_EQ(c.calls[1].name, "b");
  // What had streamed when the `}` broke it.
  EXPECT_EQ(c.calls[1].arguments, "{\"x\": ");
  EXPECT_EQ(c.broken, std::vector<int>{1});
  // The newline after the first call's closing tag is not content.
  EXPECT_EQ(c.content,
            "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": }}"
            "</tool_call>");
  EXPECT_TRUE(c.saw_tool_calls);
}

TEST(ChatOutputTest, MistralArrayWithABrokenElement) {
  Collected c = Parse(Format(ToolCallFormat::kMistral),
                      "[TOOL_CALLS][{\"name\": \"f\"}, 7]");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].arguments, "{}");
  EXPECT_TRUE(c.broken.empty());
  EXPECT_EQ(c.content, ", 7]");  // from the end of the complete call
}

TEST(ChatOutputTest, StreamCutMidCall) {
  // Before the name: nothing of the call went out; it is all content.
  const std::string early = "Let me see. <tool_call>\n{\"name\": \"get_w";
  Collected a = Parse(Format(ToolCallFormat::kHermes), early);
  EXPECT_EQ(a.content, early);
  EXPECT_TRUE(a.calls.empty());
  EXPECT_TRUE(a.broken.empty());
  // After the name: the call went out with part of its arguments; Finish
  // marks it broken and the text is content too.
  const std::string late =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa";
  Collected b = Parse(Format(ToolCallFormat::kHermes), late);
  EXPECT_EQ(b.content, late);
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].name, "get_weather");
  EXPECT_EQ(b.calls[0].arguments, "{\"city\": \"Pa");
  EXPECT_EQ(b.broken, std::vector<int>{0});
  EXPECT_FALSE(b.saw_tool_calls);
  // A complete object whose closing tag was cut is a complete call.
  Collected d = Parse(Format(ToolCallFormat::kHermes),
                      "<tool_call>{\"name\": \"f\", \"arguments\": {}}\n</to");
  EXPECT_TRUE(d.saw_tool_calls);
  EXPECT_EQ(d.content, "</to");
  // Mistral, cut after [ARGS].
  const std::string m = "[TOOL_CALLS]f[ARGS]{\"a\": [1, ";
  Collected e = Parse(Format(ToolCallFormat::kMistralArgs), m);
  EXPECT_EQ(e.content, m);
  EXPECT_EQ(e.broken, std::vector<int>{0});
  EXPECT_EQ(e.calls.at(0).arguments, "{\"a\": [1, ");
}

TEST(ChatOutputTest, DeepNestingAndLongGarbageDoNotCrash) {
  std::string deep = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ";
  deep += std::string(100000, '[');
  Collected c = Parse(Format(ToolCallFormat::kHermes), deep);
  EXPECT_EQ(c.content, deep);
  EXPECT_EQ(c.broken, std::vector<int>{0});
  std::string garbage;
  std::mt19937 rng(3);
  for (int i = 0; i < 20000; ++i) {
    garbage += "<tool_call>{\"name\":[]}\"\\,:"[rng() % 26];
  }
  for (ToolCallFormat f :
       {ToolCallFormat::kHermes, ToolCallFormat::kLlama3,
        ToolCallFormat::kMistral, ToolCallFormat::kMistralArgs}) {
    Collected g = Parse(Format(f, true), garbage);
    EXPECT_LE(g.content.size() + g.reasoning.size(), garbage.size());
  }
}

// --- Unicode and ids -----------------------------------------------------

TEST(ChatOutputTest, Unicode) {
  Collected c =
      Parse(Format(ToolCallFormat::kHermes, true),
            "<think>Думаю… 🤔</think>Voilà — "
            "天気を調べます。<tool_call>"
            "{\"name\": \"get_\\u00e9t\\u00e9\", \"arguments\": {\"ville\": "
            "\"Zürich 🇨🇭\", \"\\u540d\": \"\\ud83d\\ude00\"}}</tool_call>");
  EXPECT_EQ(c.reasoning, "Думаю… 🤔");
  EXPECT_EQ(c.content, "Voilà — 天気を調べます。");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_été");
  ExpectArguments(c.calls[0], R"({"ville": "Zürich 🇨🇭", "名": "😀"})");
}

// Pushes of whole characters give deltas of whole characters.
TEST(ChatOutputTest, DeltasEndOnCharacterBoundaries) {
  const std::string text =
      "<think>Привет 🤔 мир</think>Ça va — 好 "
      "<tool_call>{\"name\": "
      "\"f\", "
      "\"arguments\": {\"é\": \"日本語 😀\"}}</tool_call>ünd "
      "<tool_call>{\"ключ_очень_длинный_ключ\": 1}</tool_call> 終";
  std::vector<size_t> cuts;  // character starts
  for (size_t at = 0; at < text.size();) {
    cuts.push_back(at);
    at += ScanUtf8(absl::string_view(text).substr(at)).length;
  }
  auto valid = [](const std::string& s) { return SanitizeUtf8(s) == s; };
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    std::mt19937 rng(seed);
    ChatOutputParser parser(Format(ToolCallFormat::kHermes, true));
    Collected c;
    auto check = [&](const ChatOutputDelta& d) {
      EXPECT_TRUE(valid(d.content)) << d.content;
      EXPECT_TRUE(valid(d.reasoning)) << d.reasoning;
      for (const ChatToolCallDelta& t : d.tool_calls) {
        EXPECT_TRUE(valid(t.arguments)) << t.arguments;
      }
      Add(d, c);
    };
    for (size_t i = 0; i < cuts.size();) {
      size_t next = std::min(cuts.size(), i + 1 + rng() % 4);
      size_t end = next < cuts.size() ? cuts[next] : text.size();
      check(parser.Push(text.substr(cuts[i], end - cuts[i])));
      i = next;
    }
    check(parser.Finish());
    EXPECT_EQ(c.reasoning, "Привет 🤔 мир");
    EXPECT_EQ(c.content,
              "Ça va — 好ünd <tool_call>{\"ключ_очень_длинный_ключ\": 1}"
              "</tool_call> 終");
    ASSERT_EQ(c.calls.size(), 1u);
    EXPECT_EQ(c.calls[0].arguments, "{\"é\": \"日本語 😀\"}");
  }
}

TEST(ChatOutputTest, IdsAreDeterministicAndInjectable) {
  const std::string two =
      "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\"}"
      "</tool_call>";
  auto ids = [&](uint64_t seed, ToolCallFormat f, const std::string& text) {
    ChatOutputParser parser(Format(f), seed);
    Collected c;
    Add(parser.Push(text), c);
    Add(parser.Finish(), c);
    std::vector<std::string> out;
    for (const Call& call : c.calls) out.push_back(call.id);
    return out;
  };
  std::vector<std::string> first = ids(1, ToolCallFormat::kHermes, two);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first, ids(1, ToolCallFormat::kHermes, two));
  EXPECT_NE(first, ids(2, ToolCallFormat::kHermes, two));
  EXPECT_NE(first[0], first[1]);
  for (const std::string& id : first) {
    ASSERT_EQ(id.size(), 14u) << id;
    EXPECT_EQ(id.substr(0, 5), "call_");
  }
  std::vector<std::string> mistral =
      ids(1, ToolCallFormat::kMistralArgs, "[TOOL_CALLS]a[ARGS]{}");
  ASSERT_EQ(mistral.size(), 1u);
  EXPECT_EQ(mistral[0].size(), 9u);
  for (char ch : mistral[0]) EXPECT_TRUE(std::isalnum(ch)) << mistral[0];

  int n = 0;
  ChatOutputParser injected(Format(ToolCallFormat::kHermes),
                            [&n] { return absl::StrCat("id", n++); });
  ChatOutputDelta delta = injected.Push(two);
  ASSERT_EQ(delta.tool_calls.size(), 2u);
  EXPECT_EQ(delta.tool_calls[0].id, "id0");
  EXPECT_EQ(delta.tool_calls[1].id, "id1");
}

// --- The real templates --------------------------------------------------

std::string ReadTemplate(const std::string& file) {
  std::string source = testing::ReadFile(kTemplates + file);
  EXPECT_FALSE(source.empty()) << file;
  return source;
}

TEST(ChatOutputFormatTest, DetectedFromTheTemplatesMarkers) {
  struct Case {
    std::string file;
    std::string reasoning_open;
    ToolCallFormat tools;
  };
  const std::vector<Case> cases = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "", ToolCallFormat::kHermes},
      {"Qwen-Qwen3-0.6B.jinja", "<think>", ToolCallFormat::kHermes},
      {"Qwen-QwQ-32B.jinja", "<think>", ToolCallFormat::kHermes},
      // XML-style calls (`<function=...>`): not parsed.
      {"Qwen3-Coder.jinja", "", ToolCallFormat::kNone},
      {"Qwen3.5-4B.jinja", "<think>", ToolCallFormat::kNone},
      {"meetkai-functionary-medium-v3.1.jinja", "", ToolCallFormat::kNone},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "",
       ToolCallFormat::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "",
       ToolCallFormat::kHermes},
      // DeepSeek's own call tokens are not parsed; the reasoning is.
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "<think>",
       ToolCallFormat::kNone},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "<think>",
       ToolCallFormat::kNone},
      {"llama-cpp-deepseek-r1.jinja", "<think>", ToolCallFormat::kNone},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "", ToolCallFormat::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", "", ToolCallFormat::kLlama3},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", "", ToolCallFormat::kLlama3},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "",
       ToolCallFormat::kMistral},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "",
       ToolCallFormat::kMistralArgs},
      {"unsloth-mistral-Devstral-Small-2507.jinja", "",
       ToolCallFormat::kMistralArgs},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "[THINK]",
       ToolCallFormat::kMistralArgs},
      {"google-gemma-2-2b-it.jinja", "", ToolCallFormat::kNone},
  };
  for (const Case& c : cases) {
    ChatOutputFormat format = DetectChatOutputFormat(ReadTemplate(c.file));
    EXPECT_EQ(format.reasoning_open, c.reasoning_open) << c.file;
    EXPECT_EQ(format.reasoning_close.empty(), c.reasoning_open.empty());
    EXPECT_EQ(ToolCallFormatName(format.tool_calls),
              ToolCallFormatName(c.tools))
        << c.file;
    EXPECT_FALSE(format.starts_in_reasoning);
  }
}

// Renders each request with the jinja2 reference, in one process.
std::vector<json> RenderReference(const std::vector<json>& requests) {
  std::string lines;
  for (const json& r : requests) lines += r.dump() + "\n";
  std::string path = testing::WriteFile("render_requests.jsonl", lines);
  testing::CommandResult run = testing::RunCommand(
      {"/bin/sh", "-c",
       absl::StrCat("exec /usr/bin/python3 '", kTemplates,
                    "render_reference.py' --batch < '", path, "'")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  std::vector<json> answers;
  for (absl::string_view line : absl::StrSplit(run.out, '\n')) {
    if (line.empty()) continue;
    answers.push_back(json::parse(line, nullptr, false));
  }
  EXPECT_EQ(answers.size(), requests.size()) << run.err;
  answers.resize(requests.size());
  return answers;
}

json RenderRequest(const std::string& file, json messages, bool generation,
                   json extra = json::object()) {
  json context = {{"messages", std::move(messages)},
                  {"add_generation_prompt", generation},
                  {"bos_token", "<s>"},
                  {"eos_token", "</s>"}};
  context.update(extra);
  return {{"template", ReadTemplate(file)}, {"context", context}};
}

TEST(ChatOutputFormatTest, PromptOpensReasoningOnRenderedPrompts) {
  struct Case {
    std::string file;
    json variables;
    bool opens;
  };
  const std::vector<Case> cases = {
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", json::object(), true},
      {"llama-cpp-deepseek-r1.jinja", json::object(), true},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
       {{"enable_thinking", true}},
       true},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", json::object(), false},
      {"Qwen-QwQ-32B.jinja", {{"enable_thinking", true}}, true},
      {"Qwen-QwQ-32B.jinja", {{"enable_thinking", false}}, false},
      {"Qwen-Qwen3-0.6B.jinja", json::object(), false},
      {"Qwen-Qwen3-0.6B.jinja", {{"enable_thinking", false}}, false},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", json::object(), false},
  };
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  std::vector<json> requests;
  for (const Case& c : cases) {
    requests.push_back(RenderRequest(c.file, messages, true, c.variables));
  }
  std::vector<json> answers = RenderReference(requests);
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(answers[i].value("ok", false)) << cases[i].file;
    ChatOutputFormat format =
        DetectChatOutputFormat(ReadTemplate(cases[i].file));
    EXPECT_EQ(
        PromptOpensReasoning(answers[i]["text"].get<std::string>(), format),
        cases[i].opens)
        << cases[i].file << " " << cases[i].variables.dump();
  }
  ChatOutputFormat think = Format(ToolCallFormat::kNone, true);
  EXPECT_TRUE(PromptOpensReasoning("x<think> \n", think));
  EXPECT_FALSE(PromptOpensReasoning("<think>x", think));
  EXPECT_FALSE(PromptOpensReasoning("x<think>\n", ChatOutputFormat()));
}

// The oracle for the call formats: what a template renders for an
// assistant turn with tool calls is the text the model was trained to
// write. Parsing it must give back the turn's calls.
TEST(ChatOutputFormatTest, RoundTripThroughTheTemplates) {
  struct Case {
    std::string file;
    std::string header;  // the assistant turn's opening
    std::string end;     // what ends the turn
    int max_calls;
  };
  const std::string im = "<|im_start|>assistant\n";
  const std::string llama = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  const std::vector<Case> cases = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", im, "<|im_end|>", 2},
      {"Qwen-Qwen3-0.6B.jinja", im, "<|im_end|>", 2},
      {"Qwen-QwQ-32B.jinja", im, "<|im_end|>", 2},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", im, "<|im_end|>",
       2},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", im, "<|im_end|>",
       2},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", llama, "<|eot_id|>", 1},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", llama, "<|eot_id|>", 1},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", llama, "<|eot_id|>", 1},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "", "</s>", 2},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "", "</s>", 2},
      {"unsloth-mistral-Devstral-Small-2507.jinja", "", "</s>", 2},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "", "</s>", 2},
  };
  const json calls = json::parse(R"([
    {"id": "abcDEF123", "type": "function", "function": {
      "name": "get_weather", "arguments": {"city": "Zürich", "days": [1, 2],
      "opts": {"unit": "°C \"metric\"", "deep": [{"a": null}]}}}},
    {"id": "xyz987QWE", "type": "function", "function": {
      "name": "get_time", "arguments": {"tz": "Europe/Paris"}}}])");
  const json tools = json::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]}}}])");
  const json user = {{"role", "user"}, {"content", "Weather?"}};
  const std::string said = "Let me look.";
  const std::string thought = "Need the weather.";

  struct Pending {
    const Case* c;
    int n;
  };
  std::vector<Pending> pending;
  std::vector<json> requests;
  for (const Case& c : cases) {
    for (int n = 1; n <= c.max_calls; ++n) {
      json assistant = {{"role", "assistant"},
                        {"content", said},
                        {"reasoning_content", thought},
                        {"tool_calls", json(calls.begin(), calls.begin() + n)}};
      requests.push_back(RenderRequest(c.file, json::array({user}), false,
                                       {{"tools", tools}}));
      requests.push_back(RenderRequest(c.file, json::array({user, assistant}),
                                       false, {{"tools", tools}}));
      pending.push_back({&c, n});
    }
  }
  std::vector<json> answers = RenderReference(requests);
  for (size_t i = 0; i < pending.size(); ++i) {
    const Case& c = *pending[i].c;
    const json& before = answers[2 * i];
    const json& after = answers[2 * i + 1];
    ASSERT_TRUE(before.value("ok", false)) << c.file << before.dump();
    ASSERT_TRUE(after.value("ok", false)) << c.file << after.dump();
    std::string prefix = before["text"].get<std::string>() + c.header;
    std::string turn = after["text"].get<std::string>();
    ASSERT_EQ(turn.substr(0, prefix.size()), prefix) << c.file;
    std::string output = turn.substr(prefix.size());
    output = output.substr(0, output.find(c.end));
    SCOPED_TRACE(c.file + ": " + output);

    ChatOutputFormat format = DetectChatOutputFormat(ReadTemplate(c.file));
    Collected got = Parse(format, output);
    // The template may leave the turn's text or reasoning out.
    EXPECT_EQ(got.content, absl::StrContains(output, said) ? said : "");
    EXPECT_EQ(got.reasoning, absl::StrContains(output, thought) ? thought : "");
    ASSERT_EQ(got.calls.size(), static_cast<size_t>(pending[i].n));
    for (int k = 0; k < pending[i].n; ++k) {
      const json& function = calls[k]["function"];
      EXPECT_EQ(got.calls[k].name, function["name"].get<std::string>());
      ExpectArguments(got.calls[k], function["arguments"].dump());
      if (absl::StrContains(output, "[CALL_ID]")) {
        EXPECT_EQ(got.calls[k].id, calls[k]["id"].get<std::string>());
      }
    }
    EXPECT_TRUE(got.broken.empty());
    EXPECT_TRUE(got.saw_tool_calls);
  }
}

}  // namespace
}  // namespace paceline::engine
