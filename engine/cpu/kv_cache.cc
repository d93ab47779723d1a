#include "engine/cpu/kv_cache.h"

#include <cstring>
#include <limits>
#include <new>

#include "absl/strings/str_cat.h"
#include "engine/gguf/quantize.h"

namespace paceline::engine::cpu {
namespace {

constexpr std::align_val_t kAlign{64};

}  // namespace

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(
    const KvCacheShape& shape) {
  const int64_t dims[] = {shape.n_layers, shape.n_kv_heads, shape.head_dim,
                          shape.block_size, shape.num_blocks};
  if (shape.dtype != GgmlType::kF32 && shape.dtype != GgmlType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache dtype ", GetGgmlTypeTraits(shape.dtype).name,
                     " is not supported: use f32 or f16"));
  }
  const size_t element_bytes = ElementBytes(shape.dtype);
  uint64_t floats = 2;
  for (int64_t d : dims) {
    if (d <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KV cache dimensions must be positive: layers ", shape.n_layers,
          ", kv heads ", shape.n_kv_heads, ", head dim ", shape.head_dim,
          ", block size ", shape.block_size, ", blocks ", shape.num_blocks));
    }
    if (floats > std::numeric_limits<uint64_t>::max() / 8 / d) {
      return absl::ResourceExhaustedError("KV cache size overflows");
    }
    floats *= static_cast<uint64_t>(d);
  }
  void* data = ::operator new(floats * element_bytes, kAlign, std::nothrow);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", floats * element_bytes, " bytes of KV cache"));
  }
  return std::unique_ptr<KvCache>(new KvCache(shape, data, floats));
}

KvCache::~KvCache() { ::operator delete(data_, kAlign); }

void KvCache::WriteRow(int64_t layer, int64_t block, int64_t which,
                       int64_t kv_head, int64_t slot, const float* row) {
  const int64_t d = shape_.head_dim;
  if (shape_.dtype == GgmlType::kF32) {
    std::memcpy(Rows<float>(layer, block, which, kv_head) + slot * d, row,
                static_cast<size_t>(d) * sizeof(float));
    return;
  }
  uint16_t* dst = Rows<uint16_t>(layer, block, which, kv_head) + slot * d;
  for (int64_t i = 0; i < d; ++i) dst[i] = FloatToHalf(row[i]);
}

void KvCache::CopyBlock(int64_t src, int64_t dst) {
  if (src == dst) return;
  const size_t block_bytes =
      static_cast<size_t>(2 * shape_.n_kv_heads * head_elements_) *
      element_bytes_;
  for (int64_t layer = 0; layer < shape_.n_layers; ++layer) {
    std::memcpy(data_ + Offset(layer, dst, 0, 0) * element_bytes_,
                data_ + Offset(layer, src, 0, 0) * element_bytes_, block_bytes);
  }
}

}  // namespace paceline::engine::cpu
