#include "engine/cpu/kv_cache.h"

#include <cstring>
#include <limits>
#include <new>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_features.h"
#include "engine/gguf/quantize.h"

namespace paceline::engine::cpu {
namespace {

constexpr std::align_val_t kAlign{64};
constexpr int64_t kQ8Block = GgmlBlockElems(GgmlType::kQ8_0);

}  // namespace

size_t KvCache::RowBytes(GgmlType dtype, int64_t head_dim) {
  // F32 for a type Create refuses.
  const bool stored = dtype == GgmlType::kF16 || dtype == GgmlType::kQ8_0;
  return static_cast<size_t>(
      GgmlRowBytesOf(stored ? dtype : GgmlType::kF32, head_dim));
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(
    const KvCacheShape& shape) {
  const int64_t dims[] = {shape.n_layers, shape.n_kv_heads, shape.head_dim,
                          shape.block_size, shape.num_blocks};
  if (shape.dtype != GgmlType::kF32 && shape.dtype != GgmlType::kF16 &&
      shape.dtype != GgmlType::kQ8_0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache dtype ", GetGgmlTypeTraits(shape.dtype).name,
                     " is not supported: use f32, f16 or q8_0"));
  }
  for (int64_t d : dims) {
    if (d <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KV cache dimensions must be positive: layers ", shape.n_layers,
          ", kv heads ", shape.n_kv_heads, ", head dim ", shape.head_dim,
          ", block size ", shape.block_size, ", blocks ", shape.num_blocks));
    }
  }
  if (shape.dtype == GgmlType::kQ8_0 && shape.head_dim % kQ8Block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV cache dtype q8_0 needs a head size that is a multiple of ",
        kQ8Block, "; this model's is ", shape.head_dim, ": use f16"));
  }
  // Rows, then bytes: 2 (K, V) x every dimension but head_dim, x RowBytes.
  uint64_t bytes = 2;
  for (int64_t d :
       {shape.n_layers, shape.n_kv_heads, shape.block_size, shape.num_blocks,
        static_cast<int64_t>(RowBytes(shape.dtype, shape.head_dim))}) {
    if (bytes > std::numeric_limits<uint64_t>::max() / 8 / d) {
      return absl::ResourceExhaustedError("KV cache size overflows");
    }
    bytes *= static_cast<uint64_t>(d);
  }
  void* data = ::operator new(bytes, kAlign, std::nothrow);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes of KV cache"));
  }
  return std::unique_ptr<KvCache>(new KvCache(shape, data, bytes));
}

KvCache::~KvCache() { ::operator delete(data_, kAlign); }

namespace {

// FloatToHalf over a row. With F16C (the avx2 level), 8 at a time:
// vcvtps2ph rounds to nearest even and quiets NaNs keeping their top
// payload bits, FloatToHalf's rules, so the bytes are the same.
#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void HalvesF16c(const float* x, int64_t n,
                                                    uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = FloatToHalf(x[i]);
}
#endif

void Halves(const float* x, int64_t n, uint16_t* out) {
#if defined(__x86_64__)
  if (EffectiveIsaLevel() >= IsaLevel::kAvx2) return HalvesF16c(x, n, out);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(x[i]);
}

}  // namespace

void KvCache::WriteRow(int64_t layer, int64_t block, int64_t which,
                       int64_t kv_head, int64_t slot, const float* row) {
  const int64_t d = shape_.head_dim;
  unsigned char* dst =
      data_ + Offset(layer, block, which, kv_head) + slot * row_bytes_;
  switch (shape_.dtype) {
    case GgmlType::kF32:
      std::memcpy(dst, row, static_cast<size_t>(d) * sizeof(float));
      return;
    case GgmlType::kF16:
      Halves(row, d, reinterpret_cast<uint16_t*>(dst));
      return;
    default:  // Q8_0: cannot fail, d being whole blocks (Create)
      (void)QuantizeRow(GgmlType::kQ8_0, row, d, dst);
  }
}

void KvCache::CopyBlock(int64_t src, int64_t dst) {
  if (src == dst) return;
  const size_t block_bytes =
      static_cast<size_t>(2 * shape_.n_kv_heads) * head_bytes_;
  for (int64_t layer = 0; layer < shape_.n_layers; ++layer) {
    std::memcpy(data_ + Offset(layer, dst, 0, 0),
                data_ + Offset(layer, src, 0, 0), block_bytes);
  }
}

}  // namespace paceline::engine::cpu
