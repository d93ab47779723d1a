#ifndef PACELINE_ENGINE_CPU_KV_CACHE_H_
#define PACELINE_ENGINE_CPU_KV_CACHE_H_

// The CPU engine's pool of KV blocks: the storage that kvpager's block ids
// index. One float32 array laid out as
//
//   [n_layers][num_blocks][2 (K, V)][n_kv_heads][block_size][head_dim]
//
// so that, for one layer, block and KV head, the K rows of the block's
// block_size positions are contiguous (block_size × head_dim floats), and
// the V rows right after them: decode attention streams both with unit
// stride, and a block of one layer is one contiguous span to copy.
//
// Memory is reserved, not touched, at creation (pages fault in on first
// write). Slots never written hold garbage; attention only reads positions
// a sequence has written. Thread-compatible: the engine writes and reads it
// from its step; worker threads touch disjoint slots or only read.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace paceline::engine::cpu {

struct KvCacheShape {
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;
};

class KvCache {
 public:
  // InvalidArgument for a non-positive dimension; ResourceExhausted when
  // the pool cannot be allocated.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(
      const KvCacheShape& shape);

  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheShape& shape() const { return shape_; }
  size_t bytes() const { return floats_ * sizeof(float); }

  // K (which = 0) or V (which = 1) rows of one block, layer and KV head.
  //   returns: (block_size, head_dim)
  float* Rows(int64_t layer, int64_t block, int64_t which, int64_t kv_head) {
    return data_ + Offset(layer, block, which, kv_head);
  }
  const float* Rows(int64_t layer, int64_t block, int64_t which,
                    int64_t kv_head) const {
    return data_ + Offset(layer, block, which, kv_head);
  }

  // Copies K and V of every layer of block `src` into block `dst`. Ids
  // must be in range (the engine checks).
  void CopyBlock(int64_t src, int64_t dst);

 private:
  KvCache(const KvCacheShape& shape, float* data, size_t floats)
      : shape_(shape), data_(data), floats_(floats) {}

  size_t Offset(int64_t layer, int64_t block, int64_t which,
                int64_t kv_head) const {
    return static_cast<size_t>(
        (((layer * shape_.num_blocks + block) * 2 + which) * shape_.n_kv_heads +
         kv_head) *
        head_floats_);
  }

  // Constant after construction.
  const KvCacheShape shape_;
  float* const
      data_;  // (n_layers, num_blocks, 2, n_kv_heads, block_size, head_dim)
  const size_t floats_;
  const int64_t head_floats_ = shape_.block_size * shape_.head_dim;
};

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_KV_CACHE_H_
