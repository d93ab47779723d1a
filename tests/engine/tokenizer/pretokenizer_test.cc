// Splits per pre-tokenizer variant. Each expectation was derived by hand from
// the variant's regex list (engine/pretokenizer.h): leftmost matches, greedy
// quantifiers with backtracking, unmatched gaps kept as one piece, and each
// regex applied to the pieces of the previous one.

#include "engine/tokenizer/pretokenizer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

using Pieces = std::vector<std::string>;

Pieces Split(absl::string_view pre, absl::string_view text) {
  auto pretokenizer = PreTokenizer::Create(pre);
  EXPECT_TRUE(pretokenizer.ok()) << pretokenizer.status();
  if (!pretokenizer.ok()) return {};
  return pretokenizer->Split(text);
}

TEST(PreTokenizerTest, Gpt2) {
  EXPECT_EQ(Split("gpt-2", "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(Split("gpt-2", "I'm here"), (Pieces{"I", "'m", " here"}));
  // Case-sensitive contractions: "'R" is punctuation then a word.
  EXPECT_EQ(Split("gpt-2", "we'Re"), (Pieces{"we", "'", "Re"}));
  // \s+(?!\S) leaves the last space of a run to the next word.
  EXPECT_EQ(Split("gpt-2", "x  y"), (Pieces{"x", " ", " y"}));
  EXPECT_EQ(Split("gpt-2", "hi!!  3.5"),
            (Pieces{"hi", "!!", " ", " 3", ".", "5"}));
  // At the end of the text the whole run is one piece.
  EXPECT_EQ(Split("gpt-2", "a   \n"), (Pieces{"a", "   \n"}));
  // Only U+0020 joins the next word; NBSP is whitespace on its own.
  EXPECT_EQ(Split("gpt-2",
                  "a\xC2\xA0"
                  "b"),
            (Pieces{"a", "\xC2\xA0", "b"}));
  EXPECT_EQ(Split("gpt-2",
                  "\xC3\xA7"
                  "a 12"),
            (Pieces{"\xC3\xA7"
                    "a",
                    " 12"}));
  EXPECT_TRUE(Split("gpt-2", "").empty());
}

TEST(PreTokenizerTest, Llama3) {
  EXPECT_EQ(Split("llama3", "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(Split("llama3", "I'M"), (Pieces{"I", "'M"}));  // (?i:...)
  EXPECT_EQ(Split("llama3", "12345"), (Pieces{"123", "45"}));
  EXPECT_EQ(Split("llama3", "  hello\n\nworld"),
            (Pieces{" ", " hello", "\n\n", "world"}));
  EXPECT_EQ(Split("llama3", "x = (y)\n"),
            (Pieces{"x", " =", " (", "y", ")\n"}));
  // One non-letter, non-digit, non-newline may lead a word.
  EXPECT_EQ(Split("llama3", "\tabc:def"), (Pieces{"\tabc", ":def"}));
  EXPECT_EQ(Split("llama3", "3x"), (Pieces{"3", "x"}));
  // \s*[\r\n]+ ends at the last newline of a whitespace run.
  EXPECT_EQ(Split("llama3", "a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(Split("llama3", "a "), (Pieces{"a", " "}));
}

TEST(PreTokenizerTest, Qwen2SplitsDigitsOneByOne) {
  EXPECT_EQ(Split("qwen2", "abc 123"), (Pieces{"abc", " ", "1", "2", "3"}));
  EXPECT_EQ(Split("qwen2", "I've 2\n\n"),
            (Pieces{"I", "'ve", " ", "2", "\n\n"}));
  EXPECT_EQ(Split("qwen2", "\xE4\xBD\xA0\xE5\xA5\xBD!"),
            (Pieces{"\xE4\xBD\xA0\xE5\xA5\xBD", "!"}));
}

TEST(PreTokenizerTest, Default) {
  // [\p{P}$+<=>^~|]+ ; GPT-2 ; \p{N}+ ; [0-9]{3}
  EXPECT_EQ(Split("default", "Hello, world! 1234567"),
            (Pieces{"Hello", ",", " world", "!", " ", "123", "456", "7"}));
  EXPECT_EQ(Split("", "a+=b"), (Pieces{"a", "+=", "b"}));
}

TEST(PreTokenizerTest, Falcon) {
  // [\p{P}$+<=>^~|`]+ ; GPT-2 ; [0-9]{3}
  EXPECT_EQ(Split("falcon", "x 12345"), (Pieces{"x", " ", "123", "45"}));
  EXPECT_EQ(Split("falcon", "a`+b"), (Pieces{"a", "`+", "b"}));
  // Without ` in the first class, "a`" stays a gap that GPT-2 then splits.
  EXPECT_EQ(Split("default", "a`+b"), (Pieces{"a", "`", "+", "b"}));
}

TEST(PreTokenizerTest, Starcoder) {
  // \p{N} ; GPT-2
  EXPECT_EQ(Split("starcoder", "abc123 x"),
            (Pieces{"abc", "1", "2", "3", " x"}));
  EXPECT_EQ(Split("refact", "v2"), (Pieces{"v", "2"}));
}

TEST(PreTokenizerTest, DeepseekCoder) {
  // [\r\n] ; \s?\p{L}+ ; \s?\p{P}+ ; [U+0800-U+9FA5 U+AC00-U+D7FF]+ ; \p{N}
  EXPECT_EQ(Split("deepseek-coder", "Hi \xE4\xBD\xA0\xE5\xA5\xBD\n12, ok"),
            (Pieces{"Hi", " ", "\xE4\xBD\xA0\xE5\xA5\xBD", "\n", "1", "2", ",",
                    " ok"}));
  // U+3000 is whitespace, so the CJK class skips it.
  EXPECT_EQ(Split("deepseek-coder", "\xE4\xBD\xA0\xE3\x80\x80\xE5\xA5\xBD"),
            (Pieces{"\xE4\xBD\xA0", "\xE3\x80\x80", "\xE5\xA5\xBD"}));
  // Symbols match no regex and stay in their gap.
  EXPECT_EQ(Split("deepseek-coder", "a $$ b"), (Pieces{"a", " $$", " b"}));
}

TEST(PreTokenizerTest, Gpt4oSplitsOnLetterCase) {
  EXPECT_EQ(Split("gpt-4o", "Hello world"), (Pieces{"Hello", " world"}));
  // U*W+ ends a word where an upper-case letter follows lower-case ones;
  // the upper-case run gives back letters until a lower-case one follows.
  EXPECT_EQ(Split("gpt-4o", "HelloWorld"), (Pieces{"Hello", "World"}));
  EXPECT_EQ(Split("gpt-4o", "HTTPServer"), (Pieces{"HTTPServer"}));
  EXPECT_EQ(Split("gpt-4o", "ABC def"), (Pieces{"ABC", " def"}));
  // Real case outside ASCII: Cyrillic upper after lower starts a word.
  EXPECT_EQ(Split("gpt-4o",
                  "\xD0\xBF\xD1\x80\xD0\xB8"    // при
                  "\xD0\x9C\xD0\x98\xD0\xA0"),  // МИР
            (Pieces{"\xD0\xBF\xD1\x80\xD0\xB8", "\xD0\x9C\xD0\x98\xD0\xA0"}));
  // Other letters (CJK: Lo) and marks belong to both classes.
  EXPECT_EQ(Split("gpt-4o", "\xE4\xBD\xA0\xE5\xA5\xBD"),
            (Pieces{"\xE4\xBD\xA0\xE5\xA5\xBD"}));
  EXPECT_EQ(Split("gpt-4o", "e\xCC\x81x"), (Pieces{"e\xCC\x81x"}));
}

TEST(PreTokenizerTest, Gpt4oContractionsNumbersAndSymbols) {
  // The contraction stays with its word, in any case.
  EXPECT_EQ(Split("gpt-4o", "I'M here"), (Pieces{"I'M", " here"}));
  EXPECT_EQ(Split("gpt-4o", "don't"), (Pieces{"don't"}));
  EXPECT_EQ(Split("gpt-4o", "12345"), (Pieces{"123", "45"}));
  // One non-letter may lead a word; symbol runs take trailing / and \n.
  EXPECT_EQ(Split("gpt-4o", "a/b"), (Pieces{"a", "/b"}));
  EXPECT_EQ(Split("gpt-4o", "x = {}/\n"), (Pieces{"x", " =", " {}/\n"}));
  EXPECT_EQ(Split("gpt-4o", "a  b\n\nc"),
            (Pieces{"a", " ", " b", "\n\n", "c"}));
}

TEST(PreTokenizerTest, DeepseekV3) {
  EXPECT_EQ(Split("deepseek-v3", "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(Split("deepseek-v3", "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(Split("deepseek-v3", "abc123def"), (Pieces{"abc", "123", "def"}));
  // An ASCII punctuation character leads ASCII letters.
  EXPECT_EQ(Split("deepseek-v3", "a.b"), (Pieces{"a", ".b"}));
  EXPECT_EQ(Split("deepseek-v3", "x=(y)\n"), (Pieces{"x", "=(", "y", ")\n"}));
  EXPECT_EQ(Split("deepseek-v3", "  hello"), (Pieces{" ", " hello"}));
  // Ideographs and kana are split off whole; Hangul is letters.
  EXPECT_EQ(
      Split("deepseek-v3",
            "abc\xE6\x97\xA5\xE6\x9C\xAC"  // 日本
            "\xE3\x81\xAE\xE3\x83\x86"),   // のテ
      (Pieces{"abc", "\xE6\x97\xA5\xE6\x9C\xAC\xE3\x81\xAE\xE3\x83\x86"}));
  EXPECT_EQ(Split("deepseek-v3", "hi \xEC\x95\x88\xEB\x85\x95"),  // 안녕
            (Pieces{"hi", " \xEC\x95\x88\xEB\x85\x95"}));
}

TEST(PreTokenizerTest, NormalizationPerVariant) {
  for (const char* name : {"qwen2", "deepseek-r1-qwen"}) {
    EXPECT_TRUE(PreTokenizer::Create(name)->normalize_nfc()) << name;
  }
  for (const char* name :
       {"llama-bpe", "gpt-4o", "deepseek-v3", "gpt-2", "stablelm2"}) {
    EXPECT_FALSE(PreTokenizer::Create(name)->normalize_nfc()) << name;
  }
}

TEST(PreTokenizerTest, Aliases) {
  for (const char* name : {"mpt", "phi-2", "olmo"}) {
    EXPECT_EQ(Split(name, "x  y"), Split("gpt-2", "x  y")) << name;
  }
  auto llama3 = PreTokenizer::Create("llama-bpe");
  ASSERT_TRUE(llama3.ok());
  EXPECT_TRUE(llama3->ignore_merges());
  EXPECT_FALSE(PreTokenizer::Create("dbrx")->ignore_merges());
  EXPECT_FALSE(PreTokenizer::Create("gpt-2")->ignore_merges());
}

TEST(PreTokenizerTest, UnknownNameIsAnError) {
  auto pretokenizer = PreTokenizer::Create("no-such-pre");
  ASSERT_FALSE(pretokenizer.ok());
  EXPECT_EQ(pretokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pretokenizer.status().message().find("tokenizer.ggml.pre"),
            std::string::npos);
  EXPECT_NE(pretokenizer.status().message().find("no-such-pre"),
            std::string::npos);
}

TEST(PreTokenizerTest, InvalidUtf8IsReplacedBeforeSplitting) {
  EXPECT_EQ(Split("gpt-2",
                  "a\xFF"
                  "b"),
            (Pieces{"a", "\xEF\xBF\xBD", "b"}));
}

TEST(PreTokenizerTest, PiecesCoverTheText) {
  const std::string text =
      "  The quick\tbrown fox's 3.14159 jumps!!\r\n\n over... "
      "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\xA6\x99 x\xC2\xA0=\xE2\x80\x83y  ";
  for (const char* name :
       {"default", "gpt-2", "starcoder", "falcon", "deepseek-coder", "llama3",
        "qwen2", "gpt-4o", "deepseek-v3"}) {
    const Pieces pieces = Split(name, text);
    std::string joined;
    for (const std::string& piece : pieces) {
      EXPECT_FALSE(piece.empty()) << name;
      joined += piece;
    }
    EXPECT_EQ(joined, text) << name;
  }
}

TEST(PreTokenizerTest, StagesRunInSequence) {
  using Stage = PreTokenizer::Stage;
  const PreTokenizer digits_only =
      PreTokenizer::FromStages("test", {Stage::kAsciiDigits3});
  EXPECT_EQ(digits_only.Split("a1234b"), (Pieces{"a", "123", "4b"}));
  const PreTokenizer two =
      PreTokenizer::FromStages("test", {Stage::kNumberRun, Stage::kNumber});
  EXPECT_EQ(two.Split("ab12"), (Pieces{"ab", "1", "2"}));
}

}  // namespace
}  // namespace paceline::engine
