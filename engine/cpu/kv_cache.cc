#include "engine/cpu/kv_cache.h"

#include <cstring>
#include <limits>
#include <new>

#include "absl/strings/str_cat.h"

namespace paceline::engine::cpu {
namespace {

constexpr std::align_val_t kAlign{64};

}  // namespace

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(
    const KvCacheShape& shape) {
  const int64_t dims[] = {shape.n_layers, shape.n_kv_heads, shape.head_dim,
                          shape.block_size, shape.num_blocks};
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
  void* data = ::operator new(floats * sizeof(float), kAlign, std::nothrow);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", floats * sizeof(float), " bytes of KV cache"));
  }
  return std::unique_ptr<KvCache>(
      new KvCache(shape, static_cast<float*>(data), floats));
}

KvCache::~KvCache() { ::operator delete(data_, kAlign); }

void KvCache::CopyBlock(int64_t src, int64_t dst) {
  if (src == dst) return;
  const size_t block_floats =
      static_cast<size_t>(2 * shape_.n_kv_heads * head_floats_);
  for (int64_t layer = 0; layer < shape_.n_layers; ++layer) {
    std::memcpy(Rows(layer, dst, 0, 0), Rows(layer, src, 0, 0),
                block_floats * sizeof(float));
  }
}

}  // namespace paceline::engine::cpu
