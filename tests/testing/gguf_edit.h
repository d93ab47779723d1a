#ifndef PACELINE_TESTS_TESTING_GGUF_EDIT_H_
#define PACELINE_TESTS_TESTING_GGUF_EDIT_H_

// Test-only edits of a real GGUF file: the stories260K weights and
// tokenizer with metadata a test adds (e.g. a chat template).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paceline::testing {

// `gguf` (a whole file's bytes) with string metadata entries added before
// the existing ones. The tensor data keeps its offsets: a padding entry
// ("general.paceline_test_padding") makes the inserted bytes a multiple of
// the file's alignment. Errors: the bytes are not a GGUF file.
absl::StatusOr<std::string> AddStringMetadata(
    absl::string_view gguf,
    const std::vector<std::pair<std::string, std::string>>& entries);

// `gguf` with one uint32 metadata entry added, as AddStringMetadata.
absl::StatusOr<std::string> AddUint32Metadata(absl::string_view gguf,
                                              absl::string_view key,
                                              uint32_t value);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_GGUF_EDIT_H_
