// TextOutput: the delivery side's text of a stream of ids. Stop strings
// matched across token boundaries (held back until ruled out, reported,
// delivered only when asked, nothing after them), the earliest of several,
// held text flushed at the end, UTF-8 split across byte tokens, control
// tokens' text only when asked. Ids are bytes (the byte-level tokenizer).

#include "engine/tokenizer/text_output.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/byte_level.h"
#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

constexpr int32_t kBos = 256;  // a control token (byte_level.h)

class TextOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = MakeByteLevelTokenizer(300);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = *std::move(t);
  }

  // Every byte of `output` pushed, each push's text recorded, then Flush.
  struct Run {
    std::vector<std::string> pieces;  // one per id pushed
    std::string flushed;
    std::string text;  // everything returned
    bool stopped = false;
    std::string stop_string;
    int32_t tokens = 0;
  };
  Run Stream(const std::string& output, StopStrings stop,
             bool control_text = false) {
    TextOutput out(tokenizer_.get(), std::move(stop), control_text);
    Run r;
    for (char c : output) {
      r.pieces.push_back(out.Push(static_cast<uint8_t>(c)));
      r.text += r.pieces.back();
    }
    r.flushed = out.Flush();
    r.text += r.flushed;
    r.stopped = out.stopped();
    r.stop_string = out.stop_string();
    r.tokens = out.tokens();
    return r;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(TextOutputTest, WithoutStopStringsEveryCharacterAtOnce) {
  const Run r = Stream("hello", {});
  EXPECT_EQ(r.pieces, (std::vector<std::string>{"h", "e", "l", "l", "o"}));
  EXPECT_EQ(r.flushed, "");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.tokens, 5);
}

TEST_F(TextOutputTest, StopStringSplitAcrossTokens) {
  const Run r = Stream("hello world, more", {{"o w"}});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_string, "o w");
  EXPECT_EQ(r.text, "hell");
  // "o" and " " are held back, "w" completes the match: 7 ids counted,
  // nothing after them.
  EXPECT_EQ(r.tokens, 7);
  EXPECT_EQ(r.pieces[4], "");
  EXPECT_EQ(r.pieces[5], "");
  EXPECT_EQ(r.pieces[6], "");
  EXPECT_EQ(r.pieces[7], "");
  EXPECT_EQ(r.flushed, "");
}

TEST_F(TextOutputTest, IncludeDeliversTheStopString) {
  const Run r = Stream("hello world", {{"o w"}, /*include=*/true});
  EXPECT_EQ(r.text, "hello w");
  EXPECT_EQ(r.stop_string, "o w");
}

TEST_F(TextOutputTest, HeldBackTextIsReleasedWhenTheMatchFails) {
  // "wor" could start "work"; "l" rules it out.
  const Run r = Stream("a world", {{"work"}});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "a world");
  EXPECT_EQ(r.pieces[4], "");       // "wor" held
  EXPECT_EQ(r.pieces[5], "worl");   // released with "l"
}

TEST_F(TextOutputTest, EarliestOfSeveralStopStringsWins) {
  const Run r = Stream("abcdef", {{"def", "bc", "cdefg"}});
  EXPECT_EQ(r.stop_string, "bc");
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.tokens, 3);
}

TEST_F(TextOutputTest, HeldTextIsFlushedAtTheEnd) {
  const Run r = Stream("xab", {{"abd"}});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.pieces, (std::vector<std::string>{"x", "", ""}));
  EXPECT_EQ(r.flushed, "ab");
}

TEST_F(TextOutputTest, Utf8SplitAcrossByteTokens) {
  // "café!": é is two bytes, two tokens: no text until both arrive.
  Run r = Stream("caf\xc3\xa9!", {{"\xc3\xa9"}});
  EXPECT_EQ(r.stop_string, "\xc3\xa9");
  EXPECT_EQ(r.text, "caf");
  EXPECT_EQ(r.tokens, 5);
  r = Stream("caf\xc3", {});  // cut inside é
  EXPECT_EQ(r.text, "caf\xef\xbf\xbd");  // U+FFFD for the dangling byte
}

TEST_F(TextOutputTest, ControlTokensHaveTextOnlyWhenAsked) {
  TextOutput plain(tokenizer_.get(), {}, false);
  EXPECT_EQ(plain.Push(kBos), "");
  TextOutput chat(tokenizer_.get(), {}, true);
  EXPECT_EQ(chat.Push(kBos), tokenizer_->TokenText(kBos));
  EXPECT_FALSE(chat.Push(kBos).empty());
}

}  // namespace
}  // namespace paceline::engine
