#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/unicode.h"
#include "gtest/gtest.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::engine {
namespace {

using Ids = std::vector<int32_t>;

Ids operator+(Ids a, const Ids& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool Contains(const absl::Status& status, absl::string_view text) {
  return absl::string_view(status.message().data(), status.message().size())
             .find(text) != absl::string_view::npos;
}

// <unk> <s> </s>, the 256 byte tokens (ids 3..258), then scored pieces.
TokenizerVocab SpmVocab() {
  TokenizerVocab v;
  v.model = "llama";
  auto add = [&v](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    add(absl::StrFormat("<0x%02X>", b), 0, TokenType::kByte);
  }
  for (const auto& [text, score] :
       std::vector<std::pair<std::string, float>>{{"\xE2\x96\x81", -10},
                                                  {"h", -10},
                                                  {"e", -10},
                                                  {"l", -10},
                                                  {"o", -10},
                                                  {"ll", -1},
                                                  {"he", -2},
                                                  {"\xE2\x96\x81h", -3},
                                                  {"hell", -1.5},
                                                  {"a", -10},
                                                  {"b", -10},
                                                  {"\xE2\x96\x81"
                                                   "a",
                                                   -4},
                                                  {"\xE2\x96\x81"
                                                   "b",
                                                   -4}}) {
    add(text, score, TokenType::kNormal);
  }
  add("<|x|>", 0, TokenType::kUserDefined);
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

std::unique_ptr<Tokenizer> MustCreate(TokenizerVocab vocab) {
  auto tokenizer = Tokenizer::Create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

int32_t Byte(int b) { return 3 + b; }  // SPM byte token id

TEST(SpmTokenizerTest, MergesHighestScoreFirst) {
  auto t = MustCreate(SpmVocab());
  ASSERT_NE(t, nullptr);
  // ll (-1) first, then he (-2), then hell (-1.5); ▁h (-3) is stale by then.
  EXPECT_EQ(
      t->Encode("hello", false),
      (Ids{t->TokenId("\xE2\x96\x81"), t->TokenId("hell"), t->TokenId("o")}));
}

TEST(SpmTokenizerTest, EqualScoresMergeLeftmostFirst) {
  auto t = MustCreate(SpmVocab());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("lll", false), (Ids{t->TokenId("\xE2\x96\x81"),
                                          t->TokenId("ll"), t->TokenId("l")}));
}

TEST(SpmTokenizerTest, ByteFallback) {
  auto t = MustCreate(SpmVocab());
  ASSERT_NE(t, nullptr);
  const int32_t space_h = t->TokenId("\xE2\x96\x81h");
  EXPECT_EQ(t->Encode("h\xE2\x82\xAC", false),  // h€
            (Ids{space_h, Byte(0xE2), Byte(0x82), Byte(0xAC)}));
  // Invalid and truncated UTF-8 keep their bytes.
  EXPECT_EQ(t->Encode("\xFF", false),
            (Ids{t->TokenId("\xE2\x96\x81"), Byte(0xFF)}));
  EXPECT_EQ(t->Encode("h\xE4\xBD", false),
            (Ids{space_h, Byte(0xE4), Byte(0xBD)}));
  // As in llama.cpp, a lead byte claims its length without checking the
  // bytes that follow: here "\xE4" swallows two bytes of the next '▁'.
  EXPECT_EQ(t->Encode("\xE4 a", false),
            (Ids{t->TokenId("\xE2\x96\x81"), Byte(0xE4), Byte(0xE2), Byte(0x96),
                 Byte(0x81), t->TokenId("a")}));
}

TEST(SpmTokenizerTest, LeadingSpaceRule) {
  auto t = MustCreate(SpmVocab());
  ASSERT_NE(t, nullptr);
  const int32_t space_a = t->TokenId(
      "\xE2\x96\x81"
      "a");
  const int32_t space_b = t->TokenId(
      "\xE2\x96\x81"
      "b");
  EXPECT_EQ(t->Encode("a b", false), (Ids{space_a, space_b}));
  EXPECT_EQ(t->Encode("a b", true), (Ids{1, space_a, space_b}));
  EXPECT_EQ(t->Encode("", false), Ids{});
  EXPECT_EQ(t->Encode("", true), Ids{1});

  TokenizerVocab no_prefix = SpmVocab();
  no_prefix.add_space_prefix = false;
  auto u = MustCreate(std::move(no_prefix));
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->Encode("hello", false),
            (Ids{u->TokenId("hell"), u->TokenId("o")}));
  EXPECT_EQ(u->Encode("a b", false), (Ids{u->TokenId("a"), space_b}));
}

TEST(SpmTokenizerTest, UserDefinedTokensAreCutOutAndRestartTheSpaceRule) {
  auto t = MustCreate(SpmVocab());
  ASSERT_NE(t, nullptr);
  const int32_t x = t->TokenId("<|x|>");
  // llama.cpp adds the leading space again after a special token.
  EXPECT_EQ(t->Encode("a<|x|>b", false), (Ids{t->TokenId("\xE2\x96\x81"
                                                         "a"),
                                              x,
                                              t->TokenId("\xE2\x96\x81"
                                                         "b")}));
}

TEST(SpmTokenizerTest, RstripEatsWhitespaceAfterTheToken) {
  TokenizerVocab vocab = SpmVocab();
  const int32_t x = static_cast<int32_t>(vocab.tokens.size()) - 1;
  vocab.rstrip_ids = {x};
  auto t = MustCreate(std::move(vocab));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("a<|x|>  \nb", false), (Ids{t->TokenId("\xE2\x96\x81"
                                                             "a"),
                                                  x,
                                                  t->TokenId("\xE2\x96\x81"
                                                             "b")}));
}

TEST(SpmTokenizerTest, ControlTokensParsedOnlyOnRequest) {
  auto t = MustCreate(SpmVocab());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("<s>a", false),
            (Ids{t->TokenId("\xE2\x96\x81"), Byte('<'), Byte('s'), Byte('>'),
                 t->TokenId("a")}));
  EncodeOptions options;
  options.parse_special = true;
  EXPECT_EQ(t->Encode("<s>a", options), (Ids{1, t->TokenId("\xE2\x96\x81"
                                                           "a")}));
}

TEST(SpmTokenizerTest, TokenBytesAndDecode) {
  auto t = MustCreate(SpmVocab());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->TokenBytes(t->TokenId("\xE2\x96\x81h")), " h");
  EXPECT_EQ(t->TokenBytes(Byte('\n')), "\n");
  EXPECT_EQ(t->TokenBytes(Byte(0xE2)), "\xE2");
  EXPECT_EQ(t->TokenBytes(1), "");  // control
  EXPECT_EQ(t->TokenBytes(0), "");  // unknown
  EXPECT_EQ(t->TokenBytes(t->TokenId("<|x|>")), "<|x|>");
  EXPECT_EQ(t->TokenBytes(-1), "");
  EXPECT_EQ(t->TokenBytes(t->vocab_size()), "");
  for (const std::string text :
       {"hello", "a b", "h\xE2\x82\xAC!", "bad \x80 bytes \xE4", "  x\n"}) {
    EXPECT_EQ(t->Decode(t->Encode(text, true)), " " + text) << text;
  }
}

TEST(SpmTokenizerTest, Accessors) {
  auto t = MustCreate(SpmVocab());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->model(), "llama");
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
  EXPECT_TRUE(t->add_bos());
  EXPECT_TRUE(t->IsControl(1));
  EXPECT_FALSE(t->IsControl(Byte(0)));
  EXPECT_TRUE(t->IsEog(2));
  EXPECT_FALSE(t->IsEog(1));
  EXPECT_EQ(t->token_type(Byte(7)), TokenType::kByte);
  EXPECT_EQ(t->TokenText(0), "<unk>");
  EXPECT_FLOAT_EQ(t->TokenScore(t->TokenId("ll")), -1.0f);
  EXPECT_EQ(t->TokenId("no such token"), -1);
}

// The 256 byte characters (id == byte), then merged tokens.
TokenizerVocab BpeVocab(std::vector<std::string> merges,
                        std::string pre = "gpt-2") {
  TokenizerVocab v;
  v.model = "gpt2";
  v.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(EncodeUtf8(ByteToUnicode(static_cast<uint8_t>(b))));
  }
  for (const char* text : {"\xC4\xA0t", "he", "\xC4\xA0the", "th",
                           "\xC4\xA0xyz", "<|endoftext|>", "<|im_end|>"}) {
    v.tokens.push_back(text);
  }
  v.token_types.assign(v.tokens.size(), TokenType::kNormal);
  v.token_types[261] = TokenType::kControl;  // <|endoftext|>
  v.merges = std::move(merges);
  v.eos_id = 261;
  return v;
}

const std::vector<std::string> kMerges = {"h e", "\xC4\xA0 t", "t h",
                                          "\xC4\xA0t he"};

TEST(BpeTokenizerTest, MergesLowestRankFirst) {
  auto t = MustCreate(BpeVocab(kMerges));
  ASSERT_NE(t, nullptr);
  // he (0), Ġt (1), then Ġt+he (3); th (2) is stale.
  EXPECT_EQ(t->Encode(" the", false), (Ids{258}));
  EXPECT_EQ(t->Encode("the", false), (Ids{'t', 257}));

  auto u = MustCreate(BpeVocab({"t h", "\xC4\xA0 t", "h e", "\xC4\xA0t he"}));
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->Encode(" the", false), (Ids{' ', 259, 'e'}));
}

TEST(BpeTokenizerTest, BytesToUnicode) {
  auto t = MustCreate(BpeVocab(kMerges));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("\n", false), (Ids{'\n'}));
  EXPECT_EQ(t->Encode("\xC3\xA9", false), (Ids{0xC3, 0xA9}));  // é
  EXPECT_EQ(t->TokenText(' '), "\xC4\xA0");                    // Ġ
  EXPECT_EQ(t->TokenBytes(' '), " ");
  EXPECT_EQ(t->TokenBytes(0xC3), "\xC3");
  EXPECT_EQ(t->TokenBytes(256), " t");
  EXPECT_EQ(t->Decode({0xC3, 0xA9}), "\xC3\xA9");
  // Invalid input bytes are U+FFFD (EF BF BD) for byte-level BPE.
  EXPECT_EQ(t->Encode("\xFF", false), (Ids{0xEF, 0xBF, 0xBD}));
}

TEST(BpeTokenizerTest, MergesStayInsidePreTokenizerPieces) {
  auto t = MustCreate(BpeVocab(kMerges));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("a the", false), (Ids{'a', 258}));
  EXPECT_EQ(t->Encode("a\tthe", false), (Ids{'a', '\t', 't', 257}));
}

TEST(BpeTokenizerTest, IgnoreMergesLooksWholePiecesUp) {
  auto gpt2 = MustCreate(BpeVocab(kMerges, "gpt-2"));
  auto llama3 = MustCreate(BpeVocab(kMerges, "llama3"));
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(llama3, nullptr);
  EXPECT_EQ(gpt2->Encode(" xyz", false), (Ids{' ', 'x', 'y', 'z'}));
  EXPECT_EQ(llama3->Encode(" xyz", false), (Ids{260}));
}

TEST(BpeTokenizerTest, RoundTrip) {
  auto t = MustCreate(BpeVocab(kMerges));
  ASSERT_NE(t, nullptr);
  for (const std::string text :
       {"the theme", "  \t\n x", "caf\xC3\xA9 \xF0\x9F\xA6\x99 \xE4\xBD\xA0"}) {
    EXPECT_EQ(t->Decode(t->Encode(text, false)), text);
  }
}

TEST(BpeTokenizerTest, EndOfTurnTokensAreControl) {
  auto t = MustCreate(BpeVocab(kMerges));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->bos_id(), -1);
  EXPECT_EQ(t->Encode("x", true), (Ids{'x'}));  // no BOS to add
  EXPECT_TRUE(t->IsControl(262));               // <|im_end|>, typed normal
  EXPECT_TRUE(t->IsEog(262));
  EXPECT_TRUE(t->IsEog(261));
  EXPECT_EQ(t->TokenBytes(262), "");
  EncodeOptions options;
  options.parse_special = true;
  EXPECT_EQ(t->Encode("a<|im_end|>", options), (Ids{'a', 262}));
}

// The plain ranges of EncodeOptions: control-token text inside one stays
// plain text (its bytes), even when the match only overlaps the range.
TEST(BpeTokenizerTest, PlainRangesKeepControlTextPlain) {
  auto t = MustCreate(BpeVocab(kMerges));
  ASSERT_NE(t, nullptr);
  const std::string text = "a<|im_end|>b<|im_end|>";
  const TextRange second[] = {{12, 22}};
  EncodeOptions options;
  options.parse_special = true;
  options.plain_ranges = second;
  Ids got = t->Encode(text, options);
  // Whatever the merges do to the plain part, it decodes back to the text
  // and holds one control token only.
  EXPECT_EQ(std::count(got.begin(), got.end(), 262), 1);
  EXPECT_EQ(got[1], 262);
  EXPECT_EQ(t->Decode(got), "ab<|im_end|>");
  EXPECT_EQ(got, t->Encode(text.substr(0, 12), options) +
                     t->Encode(text.substr(12), false));
  // A range over one byte of the token's text is enough.
  const TextRange one_byte[] = {{5, 6}};
  options.plain_ranges = one_byte;
  got = t->Encode("a<|im_end|>", options);
  EXPECT_EQ(std::count(got.begin(), got.end(), 262), 0);
  EXPECT_EQ(t->Decode(got), "a<|im_end|>");
  // Outside the ranges control text is still recognised.
  const TextRange before[] = {{0, 1}};
  options.plain_ranges = before;
  EXPECT_EQ(t->Encode("a<|im_end|>", options), (Ids{'a', 262}));
}

// The end-of-turn texts llama.cpp names end generation (and are control);
// gpt-oss's "<|end|>" next to "<|return|>" and "<|call|>" does not.
TEST(BpeTokenizerTest, NamedEndOfTurnTexts) {
  const auto eog_of = [](std::vector<std::string> extra) {
    TokenizerVocab v = BpeVocab(kMerges);
    for (std::string& text : extra) {
      v.tokens.push_back(std::move(text));
      v.token_types.push_back(TokenType::kNormal);
    }
    return MustCreate(std::move(v));
  };
  auto t = eog_of({"<|eot_id|>", "<end_of_turn>", "<|eom_id|>", "<|end|>",
                   "[EOT]", "<|end_of_text|>", "<turn|>", "<|start|>"});
  ASSERT_NE(t, nullptr);
  for (absl::string_view text :
       {"<|eot_id|>", "<end_of_turn>", "<|eom_id|>", "<|end|>", "[EOT]",
        "<|end_of_text|>", "<turn|>", "<|im_end|>", "<|endoftext|>"}) {
    EXPECT_TRUE(t->IsEog(t->TokenId(text))) << text;
    EXPECT_TRUE(t->IsControl(t->TokenId(text))) << text;
  }
  EXPECT_FALSE(t->IsEog(t->TokenId("<|start|>")));
  auto harmony = eog_of({"<|end|>", "<|return|>", "<|call|>"});
  ASSERT_NE(harmony, nullptr);
  const int32_t end = harmony->TokenId("<|end|>");
  EXPECT_FALSE(harmony->IsEog(end));
  EXPECT_EQ(harmony->token_type(end), TokenType::kUserDefined);
  EXPECT_TRUE(harmony->IsEog(harmony->TokenId("<|return|>")));
  EXPECT_TRUE(harmony->IsEog(harmony->TokenId("<|call|>")));
}

TEST(TokenizerValidationTest, RejectsInconsistentVocabularies) {
  const auto expect_error = [](TokenizerVocab vocab, absl::string_view key) {
    auto t = Tokenizer::Create(std::move(vocab));
    ASSERT_FALSE(t.ok()) << key;
    EXPECT_TRUE(Contains(t.status(), key)) << t.status();
  };
  TokenizerVocab v = SpmVocab();
  v.model = "bert";
  expect_error(v, "tokenizer.ggml.model");

  v = SpmVocab();
  v.scores.pop_back();
  expect_error(v, "tokenizer.ggml.scores");

  v = SpmVocab();
  v.token_types.push_back(TokenType::kNormal);
  expect_error(v, "tokenizer.ggml.token_type");

  v = SpmVocab();
  v.bos_id = 100000;
  expect_error(v, "tokenizer.ggml.bos_token_id");

  v = SpmVocab();
  v.bos_id = -1;
  expect_error(v, "tokenizer.ggml.add_bos_token");

  v = SpmVocab();
  v.tokens[3] = "<0xZZ>";
  expect_error(v, "tokenizer.ggml.token_type");

  v = SpmVocab();
  v.tokens.clear();
  v.scores.clear();
  v.token_types.clear();
  expect_error(v, "tokenizer.ggml.tokens");

  expect_error(BpeVocab(kMerges, "no-such-pre"), "tokenizer.ggml.pre");
  expect_error(BpeVocab({"zz y"}), "tokenizer.ggml.merges[0]");
  expect_error(BpeVocab({"h e", "\xC4\xA0 q"}), "tokenizer.ggml.merges[1]");
  expect_error(BpeVocab({"nospace"}), "tokenizer.ggml.merges[0]");
}

// A minimal GGUF v3 writer: metadata only, no tensors.
class GgufWriter {
 public:
  void String(const std::string& key, const std::string& value) {
    Key(key, 8);
    Str(value);
  }
  void Uint32(const std::string& key, uint32_t value) {
    Key(key, 4);
    Pod(value);
  }
  void Bool(const std::string& key, bool value) {
    Key(key, 7);
    Pod(static_cast<uint8_t>(value));
  }
  void Strings(const std::string& key, const std::vector<std::string>& v) {
    Key(key, 9);
    Pod(uint32_t{8});
    Pod(static_cast<uint64_t>(v.size()));
    for (const std::string& s : v) Str(s);
  }
  void Floats(const std::string& key, const std::vector<float>& v) {
    Key(key, 9);
    Pod(uint32_t{6});
    Pod(static_cast<uint64_t>(v.size()));
    for (float f : v) Pod(f);
  }
  void Int32s(const std::string& key, const std::vector<int32_t>& v) {
    Key(key, 9);
    Pod(uint32_t{5});
    Pod(static_cast<uint64_t>(v.size()));
    for (int32_t i : v) Pod(i);
  }

  std::string Finish() const {
    std::string out = "GGUF";
    AppendPod(&out, uint32_t{3});
    AppendPod(&out, uint64_t{0});  // tensors
    AppendPod(&out, count_);
    out += body_;
    out.resize((out.size() + 31) / 32 * 32, '\0');
    return out;
  }

 private:
  template <typename T>
  static void AppendPod(std::string* out, T value) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    out->append(bytes, sizeof(T));
  }
  template <typename T>
  void Pod(T value) {
    AppendPod(&body_, value);
  }
  void Str(const std::string& s) {
    Pod(static_cast<uint64_t>(s.size()));
    body_ += s;
  }
  void Key(const std::string& key, uint32_t type) {
    ++count_;
    Str(key);
    Pod(type);
  }

  std::string body_;
  uint64_t count_ = 0;
};

// <unk> <s> </s> ▁a a, with llama.cpp's SPM defaults left implicit.
GgufWriter SpmGguf() {
  GgufWriter w;
  w.String("tokenizer.ggml.model", "llama");
  w.Strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>",
                                      "\xE2\x96\x81"
                                      "a",
                                      "a"});
  w.Floats("tokenizer.ggml.scores", {0, 0, 0, -1, -2});
  w.Int32s("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
  return w;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> FromBytes(const std::string& bytes) {
  auto file = GgufFile::FromBuffer(
      reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!file.ok()) return file.status();
  return Tokenizer::FromGguf(**file);
}

TEST(TokenizerGgufTest, AppliesLlamaCppDefaults) {
  GgufWriter w = SpmGguf();
  w.Uint32("tokenizer.ggml.padding_token_id", 0xFFFFFFFF);  // "unset"
  const std::string bytes = w.Finish();
  auto t = FromBytes(bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->bos_id(), 1);
  EXPECT_EQ((*t)->eos_id(), 2);
  EXPECT_EQ((*t)->unk_id(), 0);
  EXPECT_EQ((*t)->pad_id(), -1);
  EXPECT_TRUE((*t)->add_bos());
  EXPECT_TRUE((*t)->add_space_prefix());
  EXPECT_EQ((*t)->Encode("a", true), (Ids{1, 3}));
}

TEST(TokenizerGgufTest, ReadsAddSpacePrefix) {
  GgufWriter w = SpmGguf();
  w.Bool("tokenizer.ggml.add_space_prefix", false);
  w.Bool("tokenizer.ggml.add_bos_token", false);
  const std::string bytes = w.Finish();
  auto t = FromBytes(bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE((*t)->add_bos());
  EXPECT_EQ((*t)->Encode("a", false), (Ids{4}));
}

TEST(TokenizerGgufTest, Phi3SpecialTokensEatTrailingWhitespace) {
  GgufWriter w;
  w.String("general.name", "Phi3");
  w.String("tokenizer.ggml.model", "llama");
  w.Strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>",
                                      "\xE2\x96\x81"
                                      "a",
                                      "a", "<0x20>"});
  w.Int32s("tokenizer.ggml.token_type", {2, 3, 4, 1, 1, 6});
  const std::string bytes = w.Finish();
  auto t = FromBytes(bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  // "</s>" is user-defined (cut out even without special parsing) and
  // strips the spaces after it; the text after it gets the leading space.
  EXPECT_EQ((*t)->Encode("a</s>  a", false), (Ids{3, 2, 3}));
}

TEST(TokenizerGgufTest, ErrorsNameTheKey) {
  struct Case {
    GgufWriter writer;
    std::string key;
  };
  std::vector<Case> cases;
  {
    GgufWriter w;
    w.Strings("tokenizer.ggml.tokens", {"a"});
    cases.push_back({w, "tokenizer.ggml.model"});
  }
  {
    GgufWriter w;
    w.String("tokenizer.ggml.model", "gpt2");
    w.Strings("tokenizer.ggml.tokens", {"a"});
    cases.push_back({w, "tokenizer.ggml.merges"});
  }
  {
    GgufWriter w;
    w.String("tokenizer.ggml.model", "llama");
    cases.push_back({w, "tokenizer.ggml.tokens"});
  }
  {
    GgufWriter w = SpmGguf();
    w.Uint32("tokenizer.ggml.bos_token_id", 99);
    cases.push_back({w, "tokenizer.ggml.bos_token_id"});
  }
  {
    GgufWriter w;
    w.String("tokenizer.ggml.model", "llama");
    w.Strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    w.Strings("tokenizer.ggml.scores", {"x", "y", "z"});
    cases.push_back({w, "tokenizer.ggml.scores"});
  }
  {
    GgufWriter w;
    w.String("tokenizer.ggml.model", "llama");
    w.Strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    w.Floats("tokenizer.ggml.scores", {0, 0});
    cases.push_back({w, "tokenizer.ggml.scores"});
  }
  for (const Case& c : cases) {
    const std::string bytes = c.writer.Finish();
    auto t = FromBytes(bytes);
    ASSERT_FALSE(t.ok()) << c.key;
    EXPECT_TRUE(Contains(t.status(), c.key)) << c.key << ": " << t.status();
  }
}

// tokenizer.ggml.eot_token_id / eom_token_id end generation whatever the
// tokens are called.
TEST(TokenizerGgufTest, EotAndEomIdsEndGeneration) {
  GgufWriter w;
  w.String("tokenizer.ggml.model", "llama");
  w.Strings("tokenizer.ggml.tokens",
            {"<unk>", "<s>", "</s>", "<turn_over>", "<msg_over>", "a"});
  w.Int32s("tokenizer.ggml.token_type", {2, 3, 3, 3, 3, 1});
  w.Uint32("tokenizer.ggml.eot_token_id", 3);
  w.Uint32("tokenizer.ggml.eom_token_id", 4);
  const std::string bytes = w.Finish();
  auto t = FromBytes(bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE((*t)->IsEog(2));
  EXPECT_TRUE((*t)->IsEog(3));
  EXPECT_TRUE((*t)->IsEog(4));
  EXPECT_FALSE((*t)->IsEog(1));
  EXPECT_FALSE((*t)->IsEog(5));

  GgufWriter bad = SpmGguf();
  bad.Uint32("tokenizer.ggml.eot_token_id", 99);
  const std::string bad_bytes = bad.Finish();
  auto refused = FromBytes(bad_bytes);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Contains(refused.status(), "tokenizer.ggml.eot_token_id"))
      << refused.status();
}

TEST(TokenizerGgufTest, Stories260K) {
  const std::string& path = ::paceline::testing::kStories260KPath;
  if (!::paceline::testing::HaveStories260K()) {
    GTEST_SKIP() << "test model not found: " << path;
  }
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto t = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->model(), "llama");
  EXPECT_EQ((*t)->vocab_size(), 512);
  const Ids ids = (*t)->Encode("Once upon a time", true);
  EXPECT_EQ(ids, (Ids{1, 403, 407, 261, 378}));
  EXPECT_EQ((*t)->Decode(ids), " Once upon a time");
  EXPECT_TRUE((*t)->IsEog(2));
}

}  // namespace
}  // namespace paceline::engine
