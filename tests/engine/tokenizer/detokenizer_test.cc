#include "engine/tokenizer/detokenizer.h"

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "gtest/gtest.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::engine {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

// <unk> <s> </s>, byte tokens <0x00>..<0xFF> (ids 3..258), then a few
// pieces.
std::unique_ptr<Tokenizer> SpmTokenizer() {
  TokenizerVocab v;
  v.model = "llama";
  auto add = [&v](std::string text, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.token_types.push_back(type);
  };
  add("<unk>", TokenType::kUnknown);
  add("<s>", TokenType::kControl);
  add("</s>", TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    add(absl::StrFormat("<0x%02X>", b), TokenType::kByte);
  }
  add("\xE2\x96\x81Once", TokenType::kNormal);  // 259
  add(",", TokenType::kNormal);                 // 260
  add("\xE2\x96\x81upon", TokenType::kNormal);  // 261
  add("\xE2\x96\x81", TokenType::kNormal);      // 262
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  auto t = Tokenizer::Create(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

int32_t Byte(uint8_t b) { return 3 + b; }

// Pushes each id and returns what each push emitted.
std::vector<std::string> PushAll(IncrementalDetokenizer& d,
                                 const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(d.Push(id));
  return out;
}

TEST(DetokenizerTest, EmojiArrivingByteByByteWaitsUntilComplete) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(t.get());
  // 🦙 = F0 9F A6 99
  EXPECT_EQ(PushAll(d, {Byte(0xF0), Byte(0x9F), Byte(0xA6), Byte(0x99)}),
            (std::vector<std::string>{"", "", "", "\xF0\x9F\xA6\x99"}));
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.Flush(), "");
}

TEST(DetokenizerTest, CjkArrivingByteByByte) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(t.get());
  // 你好 = E4 BD A0 E5 A5 BD
  EXPECT_EQ(
      PushAll(d, {Byte(0xE4), Byte(0xBD), Byte(0xA0), Byte(0xE5), Byte(0xA5)}),
      (std::vector<std::string>{"", "", "\xE4\xBD\xA0", "", ""}));
  EXPECT_EQ(d.pending_bytes(), 2u);
  EXPECT_EQ(d.Push(Byte(0xBD)), "\xE5\xA5\xBD");
}

TEST(DetokenizerTest, InvalidBytesBecomeReplacementCharacters) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(t.get());
  EXPECT_EQ(d.Push(Byte(0xFF)), kReplacement);  // never valid
  EXPECT_EQ(d.Push(Byte(0x80)), kReplacement);  // lone continuation
  EXPECT_EQ(d.Push(Byte(0xE4)), "");            // could still complete
  EXPECT_EQ(d.Push(Byte('A')), kReplacement + "A");
  EXPECT_EQ(d.Push(Byte(0xC0)), kReplacement);  // overlong lead
  EXPECT_EQ(d.Push(Byte(0xED)), "");
  EXPECT_EQ(d.Push(Byte(0xA0)), kReplacement + kReplacement);  // surrogate
}

TEST(DetokenizerTest, FlushReplacesADanglingTail) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(t.get());
  EXPECT_EQ(d.Push(259), " Once");
  EXPECT_EQ(d.Push(Byte(0xF0)), "");
  EXPECT_EQ(d.Push(Byte(0x9F)), "");
  EXPECT_EQ(d.Flush(), kReplacement);  // one per incomplete character
  EXPECT_EQ(d.Flush(), "");
  // Flush starts a new stream.
  EXPECT_EQ(d.Push(260), ",");
}

TEST(DetokenizerTest, KeepsLeadingSpaceByDefault) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(t.get());
  // A continuation after a prompt: every word keeps its own space.
  EXPECT_EQ(PushAll(d, {260, 259, 261}),
            (std::vector<std::string>{",", " Once", " upon"}));
}

TEST(DetokenizerTest, StripLeadingSpaceOption) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(t.get(), {.strip_leading_space = true});
  EXPECT_EQ(PushAll(d, {259, 261}),
            (std::vector<std::string>{"Once", " upon"}));
  d.Flush();
  // Only the first token of a stream is stripped (a leading BOS has no
  // text, so nothing is stripped then, as in llama.cpp's detokenize).
  EXPECT_EQ(PushAll(d, {1, 259}), (std::vector<std::string>{"", " Once"}));
}

TEST(DetokenizerTest, ControlTokensHaveNoText) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(t.get());
  EXPECT_EQ(d.Push(1), "");
  EXPECT_EQ(d.Push(2), "");
  EXPECT_EQ(d.Push(0), "");
  EXPECT_EQ(d.Push(-5), "");  // out of range
}

TEST(DetokenizerTest, ControlTokenTextOptionGivesTheVocabularyText) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(t.get(), {.control_token_text = true});
  EXPECT_EQ(d.Push(259), " Once");
  EXPECT_EQ(d.Push(2), "</s>");  // control: its text
  EXPECT_EQ(d.Push(0), "");      // unknown: still no text
  EXPECT_EQ(d.Push(260), ",");
}

TEST(DetokenizerTest, ControlTokenBetweenBytesDoesNotBreakACharacter) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(t.get());
  EXPECT_EQ(PushAll(d, {Byte(0xC3), 1, Byte(0xA9)}),
            (std::vector<std::string>{"", "", "\xC3\xA9"}));
}

std::string Stream(const Tokenizer& t, const std::vector<int32_t>& ids,
                   IncrementalDetokenizer::Options options = {}) {
  IncrementalDetokenizer d(&t, options);
  std::string out;
  for (int32_t id : ids) {
    const std::string piece = d.Push(id);
    EXPECT_EQ(SanitizeUtf8(piece), piece) << "emitted invalid UTF-8";
    out += piece;
  }
  return out + d.Flush();
}

TEST(DetokenizerTest, SpmRoundTripThroughByteFallback) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  // Everything but "▁Once", ",", "▁upon", "▁" falls back to bytes.
  const std::string text =
      "Once upon, \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\xA6\x99!";
  const std::vector<int32_t> ids = t->Encode(text, false);
  EXPECT_EQ(Stream(*t, ids), " " + text);
  EXPECT_EQ(Stream(*t, ids, {.strip_leading_space = true}), text);
}

TEST(DetokenizerTest, ByteLevelBpeRoundTrip) {
  TokenizerVocab v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(EncodeUtf8(ByteToUnicode(static_cast<uint8_t>(b))));
  }
  auto t = Tokenizer::Create(std::move(v));
  ASSERT_TRUE(t.ok()) << t.status();
  const std::string text = "caf\xC3\xA9 \xF0\x9F\xA6\x99 \xE4\xBD\xA0";
  const std::vector<int32_t> ids = (*t)->Encode(text, false);
  ASSERT_EQ(ids.size(), text.size());  // no merges: one token per byte
  EXPECT_EQ(Stream(**t, ids), text);
  // Cut after the second byte of 🦙: nothing of it shows yet.
  IncrementalDetokenizer d(t->get());
  std::string shown;
  for (size_t i = 0; i < 8; ++i) shown += d.Push(ids[i]);
  EXPECT_EQ(shown, "caf\xC3\xA9 ");
  EXPECT_EQ(d.pending_bytes(), 2u);
}

TEST(DetokenizerTest, Stories260KContinuation) {
  const std::string& path = ::paceline::testing::kStories260KPath;
  if (!::paceline::testing::HaveStories260K()) {
    GTEST_SKIP() << "test model not found: " << path;
  }
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto t = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<int32_t> ids = (*t)->Encode("Once upon a time", true);
  EXPECT_EQ(Stream(**t, ids), " Once upon a time");
  const std::vector<int32_t> more = (*t)->Encode("Once upon a time,", false);
  // The continuation after the prompt: "," then " there" etc. keep spaces.
  EXPECT_EQ(Stream(**t, {more.back()}), ",");
}

// The Unicode standard's "U+FFFD substitution of maximal subparts" (§3.9,
// Table 3-7), written here from the standard as the property test's
// reference: every ill-formed byte run becomes one U+FFFD per maximal
// subpart; well-formed characters pass unchanged.
std::string ReferenceDecode(const std::string& bytes) {
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    const uint8_t b = static_cast<uint8_t>(bytes[i]);
    int len = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // the second byte's range
    if (b < 0x80) {
      len = 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    }
    if (len == 0) {  // never a lead byte
      out += kReplacement;
      ++i;
      continue;
    }
    int ok = 1;  // bytes of the character that are well-formed so far
    while (ok < len && i + ok < bytes.size()) {
      const uint8_t c = static_cast<uint8_t>(bytes[i + ok]);
      const bool in_range =
          ok == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
      if (!in_range) break;
      ++ok;
    }
    if (ok == len) {
      out.append(bytes, i, len);
    } else {
      out += kReplacement;
    }
    i += ok;
  }
  return out;
}

// Scenario 12 (issue 18): random token sequences — byte tokens biased
// towards UTF-8 lead and continuation bytes, mixed with word pieces — fed
// one by one. Every push emits valid UTF-8, and the pushes plus the final
// flush equal the reference decoding of the sequence's bytes. A fresh seed
// each run, printed so that a failure can be replayed.
TEST(DetokenizerTest, RandomSequencesMatchTheMaximalSubpartReference) {
  auto t = SpmTokenizer();
  ASSERT_NE(t, nullptr);
  const uint32_t seed = std::random_device{}();
  std::printf("detokenizer property seed: %u\n", seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const std::vector<uint8_t> interesting = {
      0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1,
      0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3,
      0xF4, 0xF5, 0xFF};
  const std::vector<std::pair<int32_t, std::string>> pieces = {
      {259, " Once"}, {260, ","}, {261, " upon"}, {262, " "}};
  for (int round = 0; round < 5000; ++round) {
    const int n = std::uniform_int_distribution<int>(1, 24)(rng);
    std::vector<int32_t> ids;
    std::string bytes;
    for (int k = 0; k < n; ++k) {
      const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      if (kind == 0) {
        const auto& [id, text] =
            pieces[std::uniform_int_distribution<size_t>(0, 3)(rng)];
        ids.push_back(id);
        bytes += text;
        continue;
      }
      const uint8_t b =
          kind < 6 ? interesting[std::uniform_int_distribution<size_t>(
                         0, interesting.size() - 1)(rng)]
                   : static_cast<uint8_t>(
                         std::uniform_int_distribution<int>(0, 255)(rng));
      ids.push_back(Byte(b));
      bytes += static_cast<char>(b);
    }
    IncrementalDetokenizer d(t.get());
    std::string got;
    for (int32_t id : ids) {
      const std::string piece = d.Push(id);
      ASSERT_EQ(ReferenceDecode(piece), piece)
          << "a push emitted invalid UTF-8 in round " << round;
      got += piece;
    }
    got += d.Flush();
    ASSERT_EQ(got, ReferenceDecode(bytes)) << "round " << round;
  }
}

}  // namespace
}  // namespace paceline::engine
