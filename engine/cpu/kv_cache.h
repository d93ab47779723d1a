#ifndef PACELINE_ENGINE_CPU_KV_CACHE_H_
#define PACELINE_ENGINE_CPU_KV_CACHE_H_

// The CPU engine's pool of KV blocks: the storage that kvpager's block ids
// index. One array of F32 or F16 elements (KvCacheShape::dtype) laid out as
//
//   [n_layers][num_blocks][2 (K, V)][n_kv_heads][block_size][head_dim]
//
// so that, for one layer, block and KV head, the K rows of the block's
// block_size positions are contiguous (block_size × head_dim elements), and
// the V rows right after them: decode attention streams both with unit
// stride, and a block of one layer is one contiguous span to copy.
//
// F16 halves the bytes per token (and doubles the tokens a budget holds);
// rows are rounded to nearest-even when written, as llama.cpp's default
// cache does. Attention then treats it as F16 attention: q and the softmax
// probabilities are rounded to F16 too (attention.h).
//
// Memory is reserved, not touched, at creation (pages fault in on first
// write). Slots never written hold garbage; attention only reads positions
// a sequence has written. Thread-compatible: the engine writes and reads it
// from its step; worker threads touch disjoint slots or only read.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine::cpu {

struct KvCacheShape {
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;
  GgmlType dtype = GgmlType::kF32;  // kF32 or kF16
};

class KvCache {
 public:
  // InvalidArgument for a non-positive dimension or a dtype other than F32
  // and F16; ResourceExhausted when the pool cannot be allocated.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(
      const KvCacheShape& shape);

  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheShape& shape() const { return shape_; }
  GgmlType dtype() const { return shape_.dtype; }
  size_t bytes() const { return elements_ * element_bytes_; }

  // Bytes of one element: 4 (F32) or 2 (F16).
  static size_t ElementBytes(GgmlType dtype) {
    return dtype == GgmlType::kF16 ? 2 : 4;
  }

  // K (which = 0) or V (which = 1) rows of one block, layer and KV head,
  // as Elem: float for an F32 cache, uint16_t (F16 bits) for F16 (the
  // caller has checked dtype()).
  //   returns: (block_size, head_dim)
  template <typename Elem>
  Elem* Rows(int64_t layer, int64_t block, int64_t which, int64_t kv_head) {
    return reinterpret_cast<Elem*>(data_) + Offset(layer, block, which, kv_head);
  }
  template <typename Elem>
  const Elem* Rows(int64_t layer, int64_t block, int64_t which,
                   int64_t kv_head) const {
    return reinterpret_cast<const Elem*>(data_) +
           Offset(layer, block, which, kv_head);
  }
  // The F32 rows (an F32 cache only).
  float* Rows(int64_t layer, int64_t block, int64_t which, int64_t kv_head) {
    return Rows<float>(layer, block, which, kv_head);
  }
  const float* Rows(int64_t layer, int64_t block, int64_t which,
                    int64_t kv_head) const {
    return Rows<float>(layer, block, which, kv_head);
  }

  // Stores head_dim floats as K or V of position `slot` of a block, in the
  // cache's dtype.
  void WriteRow(int64_t layer, int64_t block, int64_t which, int64_t kv_head,
                int64_t slot, const float* row);

  // Copies K and V of every layer of block `src` into block `dst`. Ids
  // must be in range (the engine checks).
  void CopyBlock(int64_t src, int64_t dst);

 private:
  KvCache(const KvCacheShape& shape, void* data, size_t elements)
      : shape_(shape), data_(static_cast<unsigned char*>(data)),
        elements_(elements) {}

  size_t Offset(int64_t layer, int64_t block, int64_t which,
                int64_t kv_head) const {
    return static_cast<size_t>(
        (((layer * shape_.num_blocks + block) * 2 + which) * shape_.n_kv_heads +
         kv_head) *
        head_elements_);
  }

  // Constant after construction.
  const KvCacheShape shape_;
  // (n_layers, num_blocks, 2, n_kv_heads, block_size, head_dim) elements
  unsigned char* const data_;
  const size_t elements_;
  const size_t element_bytes_ = ElementBytes(shape_.dtype);
  const int64_t head_elements_ = shape_.block_size * shape_.head_dim;
};

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_KV_CACHE_H_
