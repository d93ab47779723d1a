#include "tests/testing/gguf_edit.h"

#include <cstdint>

#include "absl/status/status.h"
#include "engine/gguf/gguf_file.h"
#include "tests/testing/gguf_builder.h"

namespace paceline::testing {
namespace {

// magic, version, tensor count, metadata count.
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8;
constexpr char kPaddingKey[] = "general.paceline_test_padding";

std::string StringEntry(absl::string_view key, absl::string_view value) {
  return EncodeString(key) + EncodeU32(gguf_type::kString) +
         EncodeString(value);
}

// `gguf` with the encoded `entries` (count of them) inserted.
absl::StatusOr<std::string> AddEntries(absl::string_view gguf,
                                       const std::string& entries,
                                       size_t count) {
  auto file = engine::GgufFile::FromBuffer(
      reinterpret_cast<const uint8_t*>(gguf.data()), gguf.size());
  if (!file.ok()) return file.status();
  const uint64_t alignment = (*file)->alignment();
  const uint64_t kv_count = (*file)->metadata().size();

  std::string inserted = entries;
  // The padding entry's own bytes, then as many more as alignment needs.
  const size_t bare = StringEntry(kPaddingKey, "").size();
  const size_t total = inserted.size() + bare;
  const size_t pad = (alignment - total % alignment) % alignment;
  inserted += StringEntry(kPaddingKey, std::string(pad, ' '));

  std::string out(gguf.substr(0, kHeaderBytes));
  PatchU64(&out, GgufLayout::kKvCountOffset, kv_count + count + 1);
  out += inserted;
  const absl::string_view rest = gguf.substr(kHeaderBytes);
  out.append(rest.data(), rest.size());
  return out;
}

}  // namespace

absl::StatusOr<std::string> AddStringMetadata(
    absl::string_view gguf,
    const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string encoded;
  for (const auto& [key, value] : entries) encoded += StringEntry(key, value);
  return AddEntries(gguf, encoded, entries.size());
}

absl::StatusOr<std::string> AddUint32Metadata(absl::string_view gguf,
                                              absl::string_view key,
                                              uint32_t value) {
  return AddEntries(
      gguf,
      EncodeString(key) + EncodeU32(gguf_type::kUint32) + EncodeU32(value), 1);
}

}  // namespace paceline::testing
