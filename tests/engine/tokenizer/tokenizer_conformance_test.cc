// Token ids must equal llama.cpp's for every case of its vocab test files
// (shared/vocab/ggml-vocab-*.gguf with .inp/.out, see its README.md). The
// inputs are split the way llama.cpp's test-tokenizer-0 splits them: on
// "\n__ggml_vocab_test__\n", the final separator ending the last case.

#include <filesystem>
#include <fstream>
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

const std::string kVocabDir = ::paceline::testing::SharedPath("vocab");

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

class TokenizerConformanceTest : public ::testing::TestWithParam<std::string> {
};

TEST_P(TokenizerConformanceTest, MatchesLlamaCpp) {
  const std::string base = kVocabDir + "/ggml-vocab-" + GetParam() + ".gguf";
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
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t> got = (*tokenizer)->Encode(inputs[i], false);
    if (got == expected[i]) {
      ++passed;
      continue;
    }
    ADD_FAILURE() << GetParam() << " case " << i << "\n  input:    '"
                  << Printable(inputs[i])
                  << "'\n  expected: " << absl::StrJoin(expected[i], " ")
                  << "\n  got:      " << absl::StrJoin(got, " ");
  }
  RecordProperty("passed", passed);
  EXPECT_EQ(passed, static_cast<int>(inputs.size()))
      << GetParam() << ": " << passed << "/" << inputs.size() << " passed";
}

INSTANTIATE_TEST_SUITE_P(Vocab, TokenizerConformanceTest,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "mpt",
                                           "starcoder", "refact", "falcon",
                                           "deepseek-coder"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace paceline::engine
