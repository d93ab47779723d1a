// libFuzzer target for the tokenizers (SPM and byte-level BPE with every
// pre-tokenizer family of ../shared/vocab) and the detokenizers: request
// text and token ids come from clients, so any bytes must encode and any
// ids decode without a crash, a hang or an unbounded allocation.
//
// Input framing: byte 0 picks the vocabulary (modulo the files found),
// byte 1's bits the options (BOS, special-token parsing, plain ranges);
// the rest is the text. The same bytes, read as little-endian 16-bit
// values modulo the vocabulary size, are also decoded as token ids.
//
// Checks beyond the sanitizers': every id is in the vocabulary, encoding
// twice gives the same ids, and the incremental detokenizer's output,
// flushed, equals SanitizeUtf8 of Decode of the same ids (one owner of
// "what text these ids are", whichever way it is read).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace {

using ::paceline::engine::EncodeOptions;
using ::paceline::engine::GgufFile;
using ::paceline::engine::IncrementalDetokenizer;
using ::paceline::engine::TextRange;
using ::paceline::engine::Tokenizer;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer_fuzzer invariant violated: %s\n", what);
    std::abort();
  }
}

// The vocabularies of $PACELINE_SHARED_DIR/vocab (else the build's shared
// folder), loaded once, sorted by file name.
const std::vector<std::unique_ptr<Tokenizer>>& Tokenizers() {
  static const auto* all = [] {
    auto* out = new std::vector<std::unique_ptr<Tokenizer>>;
    const char* env = std::getenv("PACELINE_SHARED_DIR");
    const std::filesystem::path dir =
        std::filesystem::path(env != nullptr ? env : PACELINE_SHARED_DIR) /
        "vocab";
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".gguf") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto file = GgufFile::Open(f.string());
      if (!file.ok()) continue;
      auto tokenizer = Tokenizer::FromGguf(**file);
      if (tokenizer.ok()) out->push_back(*std::move(tokenizer));
    }
    if (out->empty()) {
      std::fprintf(stderr, "tokenizer_fuzzer: no vocabularies in %s\n",
                   dir.string().c_str());
      std::abort();
    }
    return out;
  }();
  return *all;
}

void EncodeChecks(const Tokenizer& t, absl::string_view text, uint8_t flags) {
  EncodeOptions options;
  options.add_bos = (flags & 1) != 0;
  options.parse_special = (flags & 2) != 0;
  // With bit 2: the middle third of the text is plain (chat_prompt.h).
  const TextRange plain[] = {{text.size() / 3, 2 * text.size() / 3}};
  if ((flags & 4) != 0 && options.parse_special) options.plain_ranges = plain;
  const std::vector<int32_t> ids = t.Encode(text, options);
  for (int32_t id : ids) Check(id >= 0 && id < t.vocab_size(), "id in range");
  Check(t.Encode(text, options) == ids, "encoding is deterministic");
}

void DecodeChecks(const Tokenizer& t, const uint8_t* data, size_t size) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < size; i += 2) {
    ids.push_back(static_cast<int32_t>((data[i] | data[i + 1] << 8) %
                                       t.vocab_size()));
  }
  IncrementalDetokenizer detokenizer(&t);
  std::string streamed;
  for (int32_t id : ids) streamed += detokenizer.Push(id);
  streamed += detokenizer.Flush();
  Check(streamed == paceline::engine::SanitizeUtf8(t.Decode(ids)),
        "streamed text equals the sanitized whole decode");
}

}  // namespace

// The vocabularies load here, before libFuzzer times any input: under the
// sanitizers, with every fuzzer of CI's stage sharing two cores, loading
// them took longer than the per-input timeout.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  Tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto& all = Tokenizers();
  const Tokenizer& t = *all[data[0] % all.size()];
  const absl::string_view text(reinterpret_cast<const char*>(data + 2),
                               size - 2);
  EncodeChecks(t, text, data[1]);
  DecodeChecks(t, data + 2, size - 2);
  return 0;
}
