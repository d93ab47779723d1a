#include "tests/testing/gpt2_vocab.h"

#include <memory>
#include <utility>

#include "engine/gguf/gguf_file.h"
#include "gtest/gtest.h"
#include "tests/testing/build_paths.h"

namespace paceline::testing {
namespace {

struct Gpt2 {
  std::unique_ptr<engine::Tokenizer> tokenizer;
  std::shared_ptr<const engine::grammar::TokenTrie> trie;
};

const Gpt2& Load() {
  static const Gpt2* vocab = [] {
    auto file =
        engine::GgufFile::Open(SharedPath("vocab/ggml-vocab-gpt-2.gguf"));
    EXPECT_TRUE(file.ok()) << file.status();
    auto tokenizer = engine::Tokenizer::FromGguf(**file);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    auto* v = new Gpt2{*std::move(tokenizer), nullptr};
    v->trie = engine::grammar::TokenTrie::FromTokenizer(*v->tokenizer);
    return v;
  }();
  return *vocab;
}

}  // namespace

const engine::Tokenizer& Gpt2Tokenizer() { return *Load().tokenizer; }

std::shared_ptr<const engine::grammar::TokenTrie> Gpt2Trie() {
  return Load().trie;
}

}  // namespace paceline::testing
