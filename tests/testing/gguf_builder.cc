#include "tests/testing/gguf_builder.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace paceline::testing {
namespace {

std::string EncodeLittleEndian(uint64_t v, int bytes) {
  std::string out(bytes, '\0');
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>(v >> (8 * i));
  return out;
}

GgufValueBytes Scalar(uint32_t type, uint64_t bits, int bytes) {
  return {type, EncodeLittleEndian(bits, bytes)};
}

uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  return alignment == 0 ? n : (n + alignment - 1) / alignment * alignment;
}

}  // namespace

GgufValueBytes U8(uint8_t v) { return Scalar(gguf_type::kUint8, v, 1); }
GgufValueBytes I8(int8_t v) {
  return Scalar(gguf_type::kInt8, static_cast<uint8_t>(v), 1);
}
GgufValueBytes U16(uint16_t v) { return Scalar(gguf_type::kUint16, v, 2); }
GgufValueBytes I16(int16_t v) {
  return Scalar(gguf_type::kInt16, static_cast<uint16_t>(v), 2);
}
GgufValueBytes U32(uint32_t v) { return Scalar(gguf_type::kUint32, v, 4); }
GgufValueBytes I32(int32_t v) {
  return Scalar(gguf_type::kInt32, static_cast<uint32_t>(v), 4);
}
GgufValueBytes F32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return Scalar(gguf_type::kFloat32, bits, 4);
}
GgufValueBytes Bool(bool v) { return Scalar(gguf_type::kBool, v ? 1 : 0, 1); }
GgufValueBytes Str(absl::string_view v) {
  return {gguf_type::kString, EncodeString(v)};
}
GgufValueBytes U64(uint64_t v) { return Scalar(gguf_type::kUint64, v, 8); }
GgufValueBytes I64(int64_t v) {
  return Scalar(gguf_type::kInt64, static_cast<uint64_t>(v), 8);
}
GgufValueBytes F64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return Scalar(gguf_type::kFloat64, bits, 8);
}

GgufValueBytes Array(uint32_t element_type,
                     const std::vector<GgufValueBytes>& elements) {
  std::string payload;
  for (const GgufValueBytes& e : elements) {
    // A nested array's payload already starts with its own element type and
    // count, exactly what the outer array's element must contain.
    payload += e.payload;
  }
  return RawArray(element_type, elements.size(), std::move(payload));
}

GgufValueBytes Encode(const engine::GgufValue& v) {
  using T = engine::GgufValueType;
  switch (v.type) {
    case T::kUint8:
      return U8(static_cast<uint8_t>(v.u));
    case T::kInt8:
      return I8(static_cast<int8_t>(v.i));
    case T::kUint16:
      return U16(static_cast<uint16_t>(v.u));
    case T::kInt16:
      return I16(static_cast<int16_t>(v.i));
    case T::kUint32:
      return U32(static_cast<uint32_t>(v.u));
    case T::kInt32:
      return I32(static_cast<int32_t>(v.i));
    case T::kFloat32:
      return F32(static_cast<float>(v.f));
    case T::kBool:
      return Bool(v.u != 0);
    case T::kString:
      return Str(v.s);
    case T::kUint64:
      return U64(v.u);
    case T::kInt64:
      return I64(v.i);
    case T::kFloat64:
      return F64(v.f);
    case T::kArray: {
      std::vector<GgufValueBytes> elements;
      elements.reserve(v.elements.size());
      for (const engine::GgufValue& e : v.elements) elements.push_back(Encode(e));
      return Array(static_cast<uint32_t>(v.element_type), elements);
    }
  }
  return RawValue(static_cast<uint32_t>(v.type), "");
}

GgufValueBytes StrArray(const std::vector<std::string>& values) {
  std::vector<GgufValueBytes> elements;
  for (const std::string& v : values) elements.push_back(Str(v));
  return Array(gguf_type::kString, elements);
}

GgufValueBytes F32Array(const std::vector<float>& values) {
  std::vector<GgufValueBytes> elements;
  for (float v : values) elements.push_back(F32(v));
  return Array(gguf_type::kFloat32, elements);
}

GgufValueBytes I32Array(const std::vector<int32_t>& values) {
  std::vector<GgufValueBytes> elements;
  for (int32_t v : values) elements.push_back(I32(v));
  return Array(gguf_type::kInt32, elements);
}

GgufValueBytes RawArray(uint32_t element_type, uint64_t count,
                        std::string payload) {
  return {gguf_type::kArray,
          EncodeU32(element_type) + EncodeU64(count) + payload};
}

GgufValueBytes RawValue(uint32_t type, std::string payload) {
  return {type, std::move(payload)};
}

std::string EncodeU32(uint32_t v) { return EncodeLittleEndian(v, 4); }
std::string EncodeU64(uint64_t v) { return EncodeLittleEndian(v, 8); }
std::string EncodeString(absl::string_view s) {
  return EncodeU64(s.size()) + std::string(s);
}

void PatchBytes(std::string* bytes, uint64_t offset, absl::string_view with) {
  if (bytes->size() < offset + with.size()) bytes->resize(offset + with.size());
  bytes->replace(offset, with.size(), with.data(), with.size());
}
void PatchU32(std::string* bytes, uint64_t offset, uint32_t v) {
  PatchBytes(bytes, offset, EncodeU32(v));
}
void PatchU64(std::string* bytes, uint64_t offset, uint64_t v) {
  PatchBytes(bytes, offset, EncodeU64(v));
}

// ---------------------------------------------------------------------------

GgufBuilder& GgufBuilder::SetMagic(absl::string_view four_bytes) {
  magic_ = std::string(four_bytes);
  return *this;
}

GgufBuilder& GgufBuilder::SetVersion(uint32_t version) {
  version_ = version;
  return *this;
}

GgufBuilder& GgufBuilder::OverrideTensorCount(uint64_t count) {
  tensor_count_ = count;
  return *this;
}

GgufBuilder& GgufBuilder::OverrideKvCount(uint64_t count) {
  kv_count_ = count;
  return *this;
}

GgufBuilder& GgufBuilder::SetAlignment(uint32_t alignment, bool write_key) {
  alignment_ = alignment;
  if (write_key) Add("general.alignment", U32(alignment));
  return *this;
}

GgufBuilder& GgufBuilder::Add(absl::string_view key, GgufValueBytes value) {
  kvs_.push_back({.key = std::string(key), .value = std::move(value)});
  return *this;
}

GgufBuilder& GgufBuilder::AddRawKv(std::string bytes) {
  kvs_.push_back({.raw = true, .raw_bytes = std::move(bytes)});
  return *this;
}

GgufBuilder& GgufBuilder::AddTensor(GgufTensorSpec spec) {
  tensors_.push_back({.spec = std::move(spec)});
  return *this;
}

GgufBuilder& GgufBuilder::AddTensor(absl::string_view name,
                                    engine::GgmlType type,
                                    std::vector<uint64_t> dims,
                                    std::string data) {
  return AddTensor({.name = std::string(name),
                    .type = static_cast<uint32_t>(type),
                    .dims = std::move(dims),
                    .data = std::move(data)});
}

GgufBuilder& GgufBuilder::AddF32Tensor(absl::string_view name,
                                       std::vector<uint64_t> dims,
                                       absl::Span<const float> values) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  std::string data(n * sizeof(float), '\0');
  if (!values.empty()) {
    std::memcpy(data.data(), values.data(),
                std::min<uint64_t>(values.size(), n) * sizeof(float));
  }
  return AddTensor(name, engine::GgmlType::kF32, std::move(dims),
                   std::move(data));
}

GgufBuilder& GgufBuilder::AddRawTensorInfo(std::string bytes) {
  tensors_.push_back({.raw = true, .raw_bytes = std::move(bytes)});
  return *this;
}

GgufBuilder& GgufBuilder::AppendTrailingBytes(absl::string_view bytes) {
  trailing_ += std::string(bytes);
  return *this;
}

std::string GgufBuilder::Build(GgufLayout* layout) const {
  GgufLayout local;
  GgufLayout& l = layout != nullptr ? *layout : local;
  l = GgufLayout();

  std::string out = magic_;
  out += EncodeU32(version_);
  out += EncodeU64(tensor_count_.value_or(tensors_.size()));
  out += EncodeU64(kv_count_.value_or(kvs_.size()));

  for (const Kv& kv : kvs_) {
    l.kv_offsets.push_back(out.size());
    if (kv.raw) {
      l.kv_value_offsets.push_back(out.size());
      out += kv.raw_bytes;
      continue;
    }
    out += EncodeString(kv.key);
    out += EncodeU32(kv.value.type);
    l.kv_value_offsets.push_back(out.size());
    out += kv.value.payload;
  }

  // Place tensor data first: infos carry the offsets.
  std::vector<uint64_t> rel_offsets;
  uint64_t next = 0, data_size = 0;
  bool has_data_section = false;
  for (const TensorEntry& t : tensors_) {
    if (t.raw) {
      rel_offsets.push_back(0);
      continue;
    }
    has_data_section = true;
    const uint64_t at = t.spec.offset.value_or(AlignUp(next, alignment_));
    rel_offsets.push_back(at);
    next = at + t.spec.data.size();
    data_size = std::max(data_size, next);
  }

  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorEntry& t = tensors_[i];
    l.tensor_info_offsets.push_back(out.size());
    if (t.raw) {
      out += t.raw_bytes;
      continue;
    }
    out += EncodeString(t.spec.name);
    out += EncodeU32(static_cast<uint32_t>(t.spec.dims.size()));
    for (uint64_t d : t.spec.dims) out += EncodeU64(d);
    out += EncodeU32(t.spec.type);
    out += EncodeU64(rel_offsets[i]);
  }
  l.infos_end = out.size();
  l.data_offset = AlignUp(out.size(), alignment_);

  if (has_data_section) {
    std::string data(data_size, '\0');
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i].raw) {
        l.tensor_data_offsets.push_back(0);
        continue;
      }
      const std::string& bytes = tensors_[i].spec.data;
      data.replace(rel_offsets[i], bytes.size(), bytes);
      l.tensor_data_offsets.push_back(l.data_offset + rel_offsets[i]);
    }
    out.resize(l.data_offset, '\0');
    out += data;
  }
  out += trailing_;
  return out;
}

// ---------------------------------------------------------------------------

void AddTinyModel(GgufBuilder& b, const TinyModelSpec& m) {
  const std::string& a = m.arch;
  const auto u32 = [](int64_t v) { return U32(static_cast<uint32_t>(v)); };
  const auto dim = [](int64_t v) { return static_cast<uint64_t>(v); };
  b.Add("general.architecture", Str(a));
  b.Add(a + ".block_count", u32(m.n_layers));
  b.Add(a + ".embedding_length", u32(m.n_embd));
  b.Add(a + ".feed_forward_length", u32(m.n_ff));
  b.Add(a + ".context_length", u32(m.context_length));
  b.Add(a + ".attention.head_count", u32(m.n_heads));
  if (m.n_kv_heads != 0) {
    b.Add(a + ".attention.head_count_kv", u32(m.n_kv_heads));
  }
  if (m.head_dim != 0) b.Add(a + ".attention.key_length", u32(m.head_dim));
  b.Add(a + ".attention.layer_norm_rms_epsilon", F32(1e-6f));
  if (m.write_tokens) {
    std::vector<std::string> tokens;
    for (int64_t i = 0; i < m.n_vocab; ++i) {
      tokens.push_back(absl::StrCat("t", i));
    }
    b.Add("tokenizer.ggml.tokens", StrArray(tokens));
  }

  const int64_t head_dim = m.head_dim != 0 ? m.head_dim : m.n_embd / m.n_heads;
  const int64_t kv_heads = m.n_kv_heads != 0 ? m.n_kv_heads : m.n_heads;
  const uint64_t embd = dim(m.n_embd), ff = dim(m.n_ff);
  const uint64_t q = dim(m.n_heads * head_dim), kv = dim(kv_heads * head_dim);
  b.AddF32Tensor("token_embd.weight", {embd, dim(m.n_vocab)});
  for (int64_t i = 0; i < m.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    b.AddF32Tensor(p + "attn_norm.weight", {embd});
    b.AddF32Tensor(p + "attn_q.weight", {embd, q});
    b.AddF32Tensor(p + "attn_k.weight", {embd, kv});
    b.AddF32Tensor(p + "attn_v.weight", {embd, kv});
    if (m.qkv_bias) {
      b.AddF32Tensor(p + "attn_q.bias", {q});
      b.AddF32Tensor(p + "attn_k.bias", {kv});
      b.AddF32Tensor(p + "attn_v.bias", {kv});
    }
    if (m.qk_norm) {
      b.AddF32Tensor(p + "attn_q_norm.weight", {dim(head_dim)});
      b.AddF32Tensor(p + "attn_k_norm.weight", {dim(head_dim)});
    }
    b.AddF32Tensor(p + "attn_output.weight", {q, embd});
    b.AddF32Tensor(p + "ffn_norm.weight", {embd});
    b.AddF32Tensor(p + "ffn_gate.weight", {embd, ff});
    b.AddF32Tensor(p + "ffn_down.weight", {ff, embd});
    b.AddF32Tensor(p + "ffn_up.weight", {embd, ff});
  }
  b.AddF32Tensor("output_norm.weight", {embd});
  if (!m.tied_output) b.AddF32Tensor("output.weight", {embd, dim(m.n_vocab)});
}

}  // namespace paceline::testing
