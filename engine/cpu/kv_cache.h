#ifndef PACELINE_ENGINE_CPU_KV_CACHE_H_
#define PACELINE_ENGINE_CPU_KV_CACHE_H_

// The CPU engine's pool of KV blocks: the storage that kvpager's block ids
// index. One array of rows (KvCacheShape::dtype: one row is head_dim
// elements, RowBytes) laid out as
//
//   [n_layers][num_blocks][2 (K, V)][n_kv_heads][block_size][row]
//
// so that, for one layer, block and KV head, the K rows of the block's
// block_size positions are contiguous (block_size rows), and the V rows
// right after them: decode attention streams both with unit stride, and a
// block of one layer is one contiguous span to copy.
//
// "Layer" here is a layer slot (model/kv_layout.h): with one KV group,
// slot = model layer; with several, a block belongs to one group and slot
// s holds that group's s-th layer, so n_layers is the most layers a group
// has and every block id means the same bytes whichever group holds it.
//
//   F32   4 bytes per element.
//   F16   2 bytes, rounded to nearest-even when written, as llama.cpp's
//         default cache does. Attention then treats it as F16 attention: q
//         and the softmax probabilities are rounded to F16 too
//         (attention.h).
//   Q8_0  34 bytes per 32 elements (ggml's block_q8_0: an F16 scale d =
//         max|x| / 127, then 32 int8 q = round(x / d)), 1.0625 bytes per
//         element; head_dim must be a multiple of 32, so a row is whole
//         blocks. Attention reads the blocks as they are (attention.h).
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
  int64_t n_layers = 0;  // layer slots per block (KvLayout::slots)
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;
  GgmlType dtype = GgmlType::kF32;  // kF32, kF16 or kQ8_0
};

class KvCache {
 public:
  // InvalidArgument for a non-positive dimension, a dtype other than F32,
  // F16 and Q8_0, or Q8_0 with a head_dim that is not a multiple of 32;
  // ResourceExhausted when the pool cannot be allocated.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(
      const KvCacheShape& shape);

  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheShape& shape() const { return shape_; }
  GgmlType dtype() const { return shape_.dtype; }
  size_t bytes() const { return bytes_; }

  // Bytes of one row of head_dim elements of `dtype` (F32, F16, Q8_0 with
  // head_dim % 32 == 0).
  static size_t RowBytes(GgmlType dtype, int64_t head_dim);

  // K (which = 0) or V (which = 1) rows of one block, layer and KV head,
  // as Elem: float for an F32 cache, uint16_t (F16 bits) for F16, uint8_t
  // (the blocks' bytes) for Q8_0 (the caller has checked dtype()).
  //   returns: (block_size, row)
  template <typename Elem>
  Elem* Rows(int64_t layer, int64_t block, int64_t which, int64_t kv_head) {
    return reinterpret_cast<Elem*>(data_ +
                                   Offset(layer, block, which, kv_head));
  }
  template <typename Elem>
  const Elem* Rows(int64_t layer, int64_t block, int64_t which,
                   int64_t kv_head) const {
    return reinterpret_cast<const Elem*>(data_ +
                                         Offset(layer, block, which, kv_head));
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
  KvCache(const KvCacheShape& shape, void* data, size_t bytes)
      : shape_(shape),
        data_(static_cast<unsigned char*>(data)),
        bytes_(bytes) {}

  // Byte offset of a block's K or V rows for one layer and KV head.
  size_t Offset(int64_t layer, int64_t block, int64_t which,
                int64_t kv_head) const {
    return static_cast<size_t>(
               ((layer * shape_.num_blocks + block) * 2 + which) *
                   shape_.n_kv_heads +
               kv_head) *
           head_bytes_;
  }

  // Constant after construction.
  const KvCacheShape shape_;
  // (n_layers, num_blocks, 2, n_kv_heads, block_size) rows
  unsigned char* const data_;
  const size_t bytes_;
  const size_t row_bytes_ = RowBytes(shape_.dtype, shape_.head_dim);
  const size_t head_bytes_ =
      static_cast<size_t>(shape_.block_size) * row_bytes_;
};

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_KV_CACHE_H_
