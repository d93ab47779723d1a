#ifndef PACELINE_ENGINE_GGUF_GGUF_FILE_H_
#define PACELINE_ENGINE_GGUF_GGUF_FILE_H_

// A read-only view of a GGUF (v2/v3) file mapped into memory.
//
// Open() validates the whole header up front: magic, version, counts,
// every metadata value (all types, nested arrays), every tensor info, the
// alignment, and that each tensor's bytes lie inside the file, aligned and
// not overlapping another tensor. Anything wrong is an error Status naming
// what and the byte offset where it was found; a bad file never crashes, and
// no length, count or nesting it claims is allocated before the bytes that
// back it are known to exist (see gguf_reader.h for the limits).
//
// Stricter than ggml in two ways: every dimension must be >= 1 (no empty
// tensors, so every `data` points at real bytes), and a bool must be 0 or 1.
//
// Thread-safety: immutable after Open(); all const methods may be called
// concurrently. Views (string_view, tensor data pointers) stay valid for the
// lifetime of the GgufFile.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine {

class GgufReader;  // gguf_reader.h

// GGUF metadata value types (on-disk ids).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

absl::string_view GgufValueTypeName(GgufValueType type);

// One metadata value. Scalars are held by value, strings as views into the
// mapping, arrays as a vector of element values (arrays may nest).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u = 0;       // unsigned integer types and bool
  int64_t i = 0;        // signed integer types
  double f = 0;         // kFloat32, kFloat64
  absl::string_view s;  // kString
  GgufValueType element_type = GgufValueType::kUint8;  // kArray only
  std::vector<GgufValue> elements;                     // kArray only
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the contiguous row
  uint64_t offset = 0;         // from the start of the data section
  uint64_t size_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping

  int64_t num_elements() const;
};

class GgufFile {
 public:
  // Maps and validates `path`. Errors: NotFound / PermissionDenied from the
  // OS, DataLoss or InvalidArgument for a malformed file (message names the
  // problem and its byte offset), Unimplemented for an unsupported version
  // (1, big-endian), ResourceExhausted for metadata arrays over the reader's
  // limit. DataLoss means the file claims more bytes than it has (truncated
  // or a corrupt length); InvalidArgument means a value is wrong whatever
  // follows. Messages start with `path`.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(
      const std::string& path);

  // Same validation over bytes the caller keeps alive (tests, the fuzzer).
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBuffer(
      const uint8_t* data, size_t size);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint64_t alignment() const { return alignment_; }
  // Start of the data section: the end of the tensor infos rounded up to
  // alignment(). A file without tensors may end before it.
  uint64_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const {
    return metadata_;
  }
  const GgufValue* Find(absl::string_view key) const;
  bool Has(absl::string_view key) const { return Find(key) != nullptr; }

  // Typed getters: NotFound when the key is absent; InvalidArgument naming
  // the key and both types when the stored type does not convert. Integer
  // getters accept any integer type whose value fits; GetFloat accepts
  // floats and integers.
  absl::StatusOr<absl::string_view> GetString(absl::string_view key) const;
  absl::StatusOr<uint64_t> GetUint(absl::string_view key) const;
  absl::StatusOr<int64_t> GetInt(absl::string_view key) const;
  absl::StatusOr<double> GetFloat(absl::string_view key) const;
  absl::StatusOr<bool> GetBool(absl::string_view key) const;
  absl::StatusOr<std::vector<absl::string_view>> GetStringArray(
      absl::string_view key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(absl::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(absl::string_view key) const;

  // Tensors in file order, and lookup by name (nullptr when absent).
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(absl::string_view name) const;

 private:
  GgufFile() = default;
  absl::Status Parse();
  absl::Status ParseMetadata(GgufReader& r, uint64_t kv_count);
  absl::Status ParseAlignment();
  absl::Status ParseTensorInfos(GgufReader& r, uint64_t tensor_count,
                                std::vector<uint64_t>* info_offsets);
  absl::Status ParseTensorInfo(GgufReader& r, GgufTensorInfo* t);
  absl::Status CheckTensorData(const std::vector<uint64_t>& info_offsets);
  absl::StatusOr<const GgufValue*> FindOrNotFound(absl::string_view key) const;

  // Constant after Open().
  void* mapping_ = nullptr;  // munmap'ed in the destructor when owned
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<uint64_t> metadata_offsets_;  // file offset of each entry
  absl::flat_hash_map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_GGUF_GGUF_FILE_H_
