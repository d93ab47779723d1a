#ifndef PACELINE_TESTS_TESTING_TEXT_VOCAB_H_
#define PACELINE_TESTS_TESTING_TEXT_VOCAB_H_

// A tokenizer for delivery tests, where the engine hands over ids and the
// stream buffer makes their text: kTextVocabSize ids, each spelling the
// text `texts` gives it ("x" for the rest), verbatim (user-defined tokens:
// spaces and newlines as they are).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"

namespace paceline::testing {

inline constexpr int32_t kTextVocabSize = 256;

inline std::unique_ptr<engine::Tokenizer> MakeTextVocab(
    const std::map<int32_t, std::string>& texts = {}) {
  engine::TokenizerVocab v;
  v.model = "llama";
  for (int32_t id = 0; id < kTextVocabSize; ++id) {
    auto it = texts.find(id);
    v.tokens.push_back(it != texts.end() ? it->second : "x");
  }
  v.token_types.assign(kTextVocabSize, engine::TokenType::kUserDefined);
  auto tokenizer = engine::Tokenizer::Create(std::move(v));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_TEXT_VOCAB_H_
