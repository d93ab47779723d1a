#ifndef PACELINE_TESTS_TESTING_GGUF_BUILDER_H_
#define PACELINE_TESTS_TESTING_GGUF_BUILDER_H_

// Test-only writer of GGUF files in memory.
//
// Builds well-formed GGUF v2/v3 bytes by default (metadata of every value
// type including nested arrays, tensor infos and data, alignment padding) and
// offers raw hooks to produce the corrupt variants a reader must reject:
// overridden counts, arbitrary type ids, raw bytes in place of an entry,
// explicit tensor offsets, and patching or truncating the finished bytes.
// Build() also reports where everything landed (GgufLayout) so tests can
// assert the offsets that error messages name.
//
// The builder does not validate anything; it writes what it is told.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/gguf_file.h"

namespace paceline::testing {

// GGUF value type ids (as on disk); unknown ids may be passed on purpose.
namespace gguf_type {
inline constexpr uint32_t kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3,
                          kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7,
                          kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11,
                          kFloat64 = 12;
}  // namespace gguf_type

// One encoded metadata value: its type id and its payload bytes (the bytes
// after the type id). Build them with the factories below.
struct GgufValueBytes {
  uint32_t type = gguf_type::kUint8;
  std::string payload;
};

GgufValueBytes U8(uint8_t v);
GgufValueBytes I8(int8_t v);
GgufValueBytes U16(uint16_t v);
GgufValueBytes I16(int16_t v);
GgufValueBytes U32(uint32_t v);
GgufValueBytes I32(int32_t v);
GgufValueBytes F32(float v);
GgufValueBytes Bool(bool v);
GgufValueBytes Str(absl::string_view v);
GgufValueBytes U64(uint64_t v);
GgufValueBytes I64(int64_t v);
GgufValueBytes F64(double v);
// An array; every element's payload is written after the element type and
// count. Elements should share `element_type`, but nothing checks that.
GgufValueBytes Array(uint32_t element_type,
                     const std::vector<GgufValueBytes>& elements);
GgufValueBytes StrArray(const std::vector<std::string>& values);
GgufValueBytes F32Array(const std::vector<float>& values);
GgufValueBytes I32Array(const std::vector<int32_t>& values);
// An array header claiming `count` elements of `element_type`, followed by
// `payload` as is (for counts the payload does not back).
GgufValueBytes RawArray(uint32_t element_type, uint64_t count,
                        std::string payload);
// Any type id with any payload.
GgufValueBytes RawValue(uint32_t type, std::string payload);
// A value read from a file (engine/gguf/gguf_file.h), encoded again: copies
// a real file's metadata into a built one.
GgufValueBytes Encode(const engine::GgufValue& v);

// Little-endian encodings, and in-place patches of built bytes.
std::string EncodeU32(uint32_t v);
std::string EncodeU64(uint64_t v);
std::string EncodeString(absl::string_view s);  // u64 length + bytes
void PatchU32(std::string* bytes, uint64_t offset, uint32_t v);
void PatchU64(std::string* bytes, uint64_t offset, uint64_t v);
void PatchBytes(std::string* bytes, uint64_t offset, absl::string_view with);

// Where Build() put things; all offsets are absolute.
struct GgufLayout {
  static constexpr uint64_t kVersionOffset = 4;
  static constexpr uint64_t kTensorCountOffset = 8;
  static constexpr uint64_t kKvCountOffset = 16;
  std::vector<uint64_t> kv_offsets;           // start of each entry (its key)
  std::vector<uint64_t> kv_value_offsets;     // start of each value's payload
  std::vector<uint64_t> tensor_info_offsets;  // start of each info (its name)
  uint64_t infos_end = 0;                     // first byte after the infos
  uint64_t data_offset = 0;                   // start of the data section
  std::vector<uint64_t> tensor_data_offsets;  // start of each tensor's bytes
};

// Every member has an initializer so that designated initializers may leave
// any of them out.
struct GgufTensorSpec {
  std::string name = {};
  uint32_t type = 0;                // ggml type id (may be unknown on purpose)
  std::vector<uint64_t> dims = {};  // ggml order; n_dims = dims.size()
  std::string data = {};            // the tensor's bytes, written as given
  // Relative to the data section; default: the next multiple of the
  // alignment after the previous tensor's data. The data is written there,
  // so for offsets beyond any buffer patch the built bytes instead.
  std::optional<uint64_t> offset = std::nullopt;
};

class GgufBuilder {
 public:
  GgufBuilder() = default;

  // Header. Defaults: "GGUF", version 3, counts from what was added.
  GgufBuilder& SetMagic(absl::string_view four_bytes);
  GgufBuilder& SetVersion(uint32_t version);
  GgufBuilder& OverrideTensorCount(uint64_t count);
  GgufBuilder& OverrideKvCount(uint64_t count);

  // Pads the data section to `alignment` (default 32). With `write_key`, also
  // adds `general.alignment` as uint32 at this point of the metadata.
  GgufBuilder& SetAlignment(uint32_t alignment, bool write_key = true);

  // Metadata entries, written in call order.
  GgufBuilder& Add(absl::string_view key, GgufValueBytes value);
  // Bytes written verbatim where an entry would go (counted as one entry).
  GgufBuilder& AddRawKv(std::string bytes);

  // Tensors, infos and data written in call order.
  GgufBuilder& AddTensor(GgufTensorSpec spec);
  GgufBuilder& AddTensor(absl::string_view name, engine::GgmlType type,
                         std::vector<uint64_t> dims, std::string data);
  // An F32 tensor holding `values`, or zeros when `values` is empty.
  GgufBuilder& AddF32Tensor(absl::string_view name, std::vector<uint64_t> dims,
                            absl::Span<const float> values = {});
  // Bytes written verbatim where a tensor info would go (counted as one).
  GgufBuilder& AddRawTensorInfo(std::string bytes);

  // Bytes appended after the data section (or after the infos when there is
  // no tensor data).
  GgufBuilder& AppendTrailingBytes(absl::string_view bytes);

  // The file. `layout`, when given, receives the offsets.
  std::string Build(GgufLayout* layout = nullptr) const;

 private:
  struct Kv {
    bool raw = false;
    std::string key = {};
    GgufValueBytes value = {};
    std::string raw_bytes = {};
  };
  struct TensorEntry {
    bool raw = false;
    GgufTensorSpec spec = {};
    std::string raw_bytes = {};
  };

  std::string magic_ = "GGUF";
  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  std::optional<uint64_t> tensor_count_;
  std::optional<uint64_t> kv_count_;
  std::vector<Kv> kvs_;
  std::vector<TensorEntry> tensors_;
  std::string trailing_;
};

// A small Llama-family model: `general.architecture`, the `<arch>.*`
// hyper-parameters and every tensor the architecture needs (F32 zeros), with
// the shapes llama.cpp writes (ggml order, shape[0] = input dimension).
struct TinyModelSpec {
  std::string arch = "llama";
  int64_t n_layers = 2;
  int64_t n_embd = 16;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;  // 0: omit attention.head_count_kv
  int64_t head_dim = 0;    // 0: omit attention.key_length (n_embd / n_heads)
  int64_t n_ff = 24;
  int64_t n_vocab = 10;
  int64_t context_length = 64;
  bool write_tokens = true;  // tokenizer.ggml.tokens with n_vocab entries
  bool tied_output = false;  // omit output.weight
  bool qkv_bias = false;     // blk.N.attn_{q,k,v}.bias
  bool qk_norm = false;      // blk.N.attn_{q,k}_norm.weight
};
void AddTinyModel(GgufBuilder& builder, const TinyModelSpec& spec);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_GGUF_BUILDER_H_
