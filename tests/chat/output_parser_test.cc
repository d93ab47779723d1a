#include "chat/output_parser.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode.h"
#include "gtest/gtest.h"
#include "tests/chat/output_collect.h"

namespace paceline::chat {
namespace {

using chat_test::Add;
using chat_test::Bytes;
using chat_test::Call;
using chat_test::Collected;
using chat_test::ExpectArguments;
using chat_test::Format;
using chat_test::Parse;
using chat_test::RandomSplit;

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

// Whitespace held while a marker may follow is kept apart, so a long run
// pushed a byte at a time is not rescanned on every push.
TEST(ChatOutputTest, LongWhitespaceRunsPushedByteByByte) {
  const std::string run(200000, ' ');
  for (bool think : {false, true}) {
    ChatOutputParser parser(Format(ToolCallFormat::kHermes, think));
    Collected c;
    Add(parser.Push(think ? "<think>a" : "a"), c);
    for (char ch : run) Add(parser.Push(std::string(1, ch)), c);
    Add(parser.Push("b"), c);
    Add(parser.Finish(), c);
    EXPECT_EQ(think ? c.reasoning : c.content, "a" + run + "b");
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
    at += engine::ScanUtf8(absl::string_view(text).substr(at)).length;
  }
  auto valid = [](const std::string& s) {
    return engine::SanitizeUtf8(s) == s;
  };
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

}  // namespace
}  // namespace paceline::chat
