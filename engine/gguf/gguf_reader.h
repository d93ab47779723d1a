#ifndef PACELINE_ENGINE_GGUF_GGUF_READER_H_
#define PACELINE_ENGINE_GGUF_GGUF_READER_H_

// A bounds-checked little-endian cursor over GGUF bytes, and the metadata
// value decoder. Internal to gguf_file.cc; not part of the engine's API.
//
// Every read checks the bytes it needs against the bytes that remain before
// it touches memory or allocates: a length, count or nesting that the rest of
// the buffer cannot hold is an error, never an allocation. Errors name what
// was being read and its absolute byte offset. Reading past the end is
// DataLoss (the buffer claims more bytes than it has); a value that cannot be
// right whatever follows (unknown type id, too deep) is InvalidArgument.
//
// Thread-compatible: one reader per thread.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/gguf_file.h"

namespace paceline::engine {

// Arrays may nest (an array of arrays of ...); deeper than this is rejected
// so that a hostile file cannot drive the recursive decoder's stack.
inline constexpr int kGgufMaxArrayDepth = 8;

// Cap on array elements decoded from one file, all arrays together. Each
// element is a GgufValue (80 bytes in memory) but may take one byte on
// disk, so without a cap a file could ask for 80x its size in memory.
// Real tokenizers hold well under a million entries per array.
inline constexpr uint64_t kGgufMaxArrayElements = uint64_t{1} << 24;

class GgufReader {
 public:
  // `data[0, size)` must outlive the reader and every view it returns.
  GgufReader(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return size_ - offset_; }

  // DataLoss naming `what` unless `bytes` more bytes remain.
  absl::Status Need(uint64_t bytes, absl::string_view what) const;

  absl::StatusOr<uint8_t> ReadU8(absl::string_view what);
  absl::StatusOr<uint16_t> ReadU16(absl::string_view what);
  absl::StatusOr<uint32_t> ReadU32(absl::string_view what);
  absl::StatusOr<uint64_t> ReadU64(absl::string_view what);

  // A GGUF string: u64 byte length, then the bytes (no terminator). The view
  // points into the buffer.
  absl::StatusOr<absl::string_view> ReadString(absl::string_view what);

  // One metadata value of `type` (already read), arrays recursively.
  // `elements_left` is the remaining kGgufMaxArrayElements budget, shared by
  // all values of a file; it is decremented by every array element decoded.
  absl::StatusOr<GgufValue> ReadValue(uint32_t type, uint64_t* elements_left);

 private:
  absl::StatusOr<GgufValue> ReadValueAt(uint32_t type, int depth,
                                        uint64_t* elements_left);
  absl::StatusOr<GgufValue> ReadArray(int depth, uint64_t* elements_left);

  const uint8_t* const data_;
  const uint64_t size_;
  uint64_t offset_ = 0;
};

// Smallest number of bytes a value of `type` takes on disk (a string or
// array header even when empty); 0 for an unknown type id.
uint64_t GgufMinValueBytes(uint32_t type);

// Whether `type` is a known GgufValueType id.
bool IsKnownGgufValueType(uint32_t type);

// `status` with "`prefix`: " put in front of its message, same code.
absl::Status AnnotateStatus(const absl::Status& status,
                            absl::string_view prefix);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_GGUF_GGUF_READER_H_
