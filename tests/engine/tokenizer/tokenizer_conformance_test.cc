// Token ids must equal the reference's for every case of the vocab test
// files: llama.cpp's (shared/vocab/ggml-vocab-*.gguf with .inp/.out) and
// Hugging Face tokenizers' for five current vocabularies (shared/vocab-hf/,
// same format); see the README.md in each. The inputs are split the way
// llama.cpp's test-tokenizer-0 splits them: on "\n__ggml_vocab_test__\n",
// the final separator ending the last case.

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/build_paths.h"

namespace paceline::engine {
namespace {

// A vocabulary: the folder under shared/ and the NAME of ggml-vocab-NAME.
struct VocabCase {
  std::string dir;
  std::string name;
};

void PrintTo(const VocabCase& c, std::ostream* os) {
  *os << c.dir << "/" << c.name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> SplitInputs(const std::string& raw) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return inputs;
}

std::vector<std::vector<int32_t>> ParseOutputs(const std::string& raw) {
  std::vector<std::vector<int32_t>> outputs;
  std::istringstream lines(raw);
  for (std::string line; std::getline(lines, line);) {
    std::vector<int32_t>& ids = outputs.emplace_back();
    for (absl::string_view field :
         absl::StrSplit(line, ' ', absl::SkipWhitespace())) {
      int32_t id = 0;
      EXPECT_TRUE(absl::SimpleAtoi(field, &id)) << "bad id '" << field << "'";
      ids.push_back(id);
    }
  }
  return outputs;
}

// Escapes control characters so a failing input prints on one line.
std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// `text` with "\r\n" and a lone "\r" turned into "\n", as a reader with
// universal newlines sees it.
std::string TranslateNewlines(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\r') {
      out.push_back(text[i]);
      continue;
    }
    out.push_back('\n');
    if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
  }
  return out;
}

// The text a case's reference ids were computed from. The .inp files of
// shared/vocab-hf/ went through a universal-newline translation after the
// reference ran (the ids of "a\r\nb" hold "\r\n"; the input reads "a\nb"),
// so for an input without "\r" whose expected ids spell that same text with
// "\r" in it, the text the ids spell is the input. Any other case is its
// input as written.
std::string ReferenceText(const Tokenizer& tokenizer, const std::string& input,
                          const std::vector<int32_t>& expected, int* restored) {
  if (input.find('\r') != std::string::npos) return input;
  const std::string spelled = tokenizer.Decode(expected);
  if (spelled.find('\r') == std::string::npos ||
      TranslateNewlines(spelled) != input) {
    return input;
  }
  ++*restored;
  return spelled;
}

class TokenizerConformanceTest : public ::testing::TestWithParam<VocabCase> {};

TEST_P(TokenizerConformanceTest, MatchesReference) {
  const std::string name = GetParam().name;
  const std::string base = ::paceline::testing::SharedPath(GetParam().dir) +
                           "/ggml-vocab-" + name + ".gguf";
  if (!std::filesystem::exists(base)) {
    GTEST_SKIP() << "conformance data not found: " << base
                 << " (PACELINE_SHARED_DIR=" << ::paceline::testing::SharedDir()
                 << ")";
  }
  auto file = GgufFile::Open(base);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tokenizer = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();

  const std::vector<std::string> inputs = SplitInputs(ReadFile(base + ".inp"));
  const std::vector<std::vector<int32_t>> expected =
      ParseOutputs(ReadFile(base + ".out"));
  ASSERT_EQ(inputs.size(), expected.size()) << base;
  ASSERT_FALSE(inputs.empty());

  int passed = 0;
  int restored = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string text =
        ReferenceText(**tokenizer, inputs[i], expected[i], &restored);
    const std::vector<int32_t> got = (*tokenizer)->Encode(text, false);
    if (got == expected[i]) {
      ++passed;
      continue;
    }
    ADD_FAILURE() << name << " case " << i << "\n  input:    '"
                  << Printable(text)
                  << "'\n  expected: " << absl::StrJoin(expected[i], " ")
                  << "\n  got:      " << absl::StrJoin(got, " ");
  }
  RecordProperty("passed", passed);
  RecordProperty("restored_newlines", restored);
  if (restored > 0) {
    std::cout << name << ": " << restored
              << " inputs had lost their \\r; encoded the reference's text\n";
  }
  EXPECT_EQ(passed, static_cast<int>(inputs.size()))
      << name << ": " << passed << "/" << inputs.size() << " passed";
}

std::string CaseName(const ::testing::TestParamInfo<VocabCase>& info) {
  std::string name = info.param.name;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

// llama.cpp's own files: llama.cpp is the reference.
INSTANTIATE_TEST_SUITE_P(
    Vocab, TokenizerConformanceTest,
    ::testing::Values(
        VocabCase{"vocab", "llama-spm"}, VocabCase{"vocab", "phi-3"},
        VocabCase{"vocab", "gpt-2"}, VocabCase{"vocab", "mpt"},
        VocabCase{"vocab", "starcoder"}, VocabCase{"vocab", "refact"},
        VocabCase{"vocab", "falcon"}, VocabCase{"vocab", "deepseek-coder"}),
    CaseName);

// Hugging Face's tokenizers as the reference (normalizer included).
INSTANTIATE_TEST_SUITE_P(VocabHf, TokenizerConformanceTest,
                         ::testing::Values(VocabCase{"vocab-hf", "llama3"},
                                           VocabCase{"vocab-hf", "qwen3"},
                                           VocabCase{"vocab-hf", "gptoss"},
                                           VocabCase{"vocab-hf", "deepseek_v3"},
                                           VocabCase{"vocab-hf", "gemma3"}),
                         CaseName);

}  // namespace
}  // namespace paceline::engine
