#ifndef PACELINE_TESTS_TESTING_GPT2_VOCAB_H_
#define PACELINE_TESTS_TESTING_GPT2_VOCAB_H_

// GPT-2's vocabulary from llama.cpp's vocab file (../shared/vocab), as the
// grammar engine's tests use it: a byte-level BPE with a token for every
// byte, small enough (50,257 tokens) for brute-force checks over it.
// Read once per process; a failure to read it fails the calling test.

#include <memory>

#include "engine/sampling/grammar/token_trie.h"
#include "engine/tokenizer/tokenizer.h"

namespace paceline::testing {

const engine::Tokenizer& Gpt2Tokenizer();
std::shared_ptr<const engine::grammar::TokenTrie> Gpt2Trie();

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_GPT2_VOCAB_H_
