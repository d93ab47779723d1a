// The panel layouts (matmul_internal.h): packing at load,
// unpacking for ISA levels without a panel kernel. Portable C++: packing
// runs once per matrix, unpacking only on the fallback path.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/matmul.h"
#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/cpu/kernels/matmul_kquant.h"
#include "engine/gguf/ggml_type.h"

namespace paceline::engine::cpu {
namespace {

using internal::kPanelRows;
using internal::kQBlock;

using internal::IsQuantized;

// Quantized types: where block b of panel row `lane` keeps its scale and
// the 4 bytes of quad q, from the panel's first byte; what quad bytes hold
// (Q8_0: w ^ 0x80; Q4_0: qs as stored); the quads per block.
int64_t QuadOffset(GgmlType type, int64_t b, int64_t q, int64_t lane) {
  return internal::PanelQuadsAt(type, b) + q * 64 + lane * 4;
}
int64_t ScaleOffset(GgmlType type, int64_t b, int64_t lane) {
  return internal::PanelScalesAt(type, b) + lane * 2;
}
uint8_t QuadXor(GgmlType type) { return type == GgmlType::kQ8_0 ? 0x80 : 0; }
int64_t QuadsPerBlock(GgmlType type) {
  return internal::PanelQuadBytes(type) / 64;
}

// K-quants: where byte i (a multiple of 4, or Q6_K's d at 208) of
// super-block b of panel row `lane` sits, from the panel's first byte
// (quad i / 4, lane; Q6_K's d after the quads).
int64_t KPanelOffset(GgmlType type, int64_t b, int64_t i, int64_t lane) {
  const int64_t quads = internal::KPanelQuads(type);
  const int64_t at = b * internal::KPanelBlockBytes(type);
  if (i < 4 * quads) return at + i / 4 * 64 + lane * 4;
  return at + quads * 64 + lane * 2;
}

// A row-major K-quant row into row `lane` of its panel (`pack`), or back:
// 4-byte quads, then Q6_K's 2-byte d.
void CopyKRow(GgmlType type, int64_t cols, int64_t lane, bool pack,
              const uint8_t* from, uint8_t* to) {
  const int64_t bb = GgmlBlockBytes(type);
  for (int64_t b = 0; b < cols / internal::kKBlock; ++b) {
    for (int64_t i = 0; i < bb; i += 4) {
      const int64_t n = std::min<int64_t>(4, bb - i);
      const int64_t panel_at = KPanelOffset(type, b, i, lane);
      const int64_t row_at = b * bb + i;
      std::memcpy(to + (pack ? panel_at : row_at),
                  from + (pack ? row_at : panel_at), n);
    }
  }
}

// Floats: the element index of column c of panel row `lane`.
constexpr int64_t kFloatLanes = 16;
int64_t FloatOffset(int64_t cols, int64_t c, int64_t lane) {
  const int64_t k0 = c / internal::kFloatPanelCols * internal::kFloatPanelCols;
  const int64_t n = std::min(internal::kFloatPanelCols, cols - k0);
  const int64_t i = (c - k0) % kFloatLanes, j = (c - k0) / kFloatLanes;
  return k0 * kPanelRows + (i * (n / kFloatLanes) + j) * kPanelRows + lane;
}

// Packs panel p (rows 16p .. 16p + 15; rows past `rows` stay zero) of a
// row-major float matrix of elements E, writing the panel in order: per
// column block, lane group i, column group j, the 16 rows of column
// k0 + 16j + i (what FloatOffset describes, without its divisions).
template <typename E>
void PackFloatPanel(const uint8_t* src, size_t row_bytes, int64_t rows,
                    int64_t cols, int64_t p, uint8_t* panel) {
  E* out = reinterpret_cast<E*>(panel);
  const int64_t lanes = std::min<int64_t>(kPanelRows, rows - p * kPanelRows);
  const uint8_t* first = src + p * kPanelRows * row_bytes;
  for (int64_t k0 = 0; k0 < cols; k0 += internal::kFloatPanelCols) {
    const int64_t nj =
        std::min(internal::kFloatPanelCols, cols - k0) / kFloatLanes;
    for (int64_t i = 0; i < kFloatLanes; ++i) {
      for (int64_t j = 0; j < nj; ++j, out += kPanelRows) {
        const int64_t c = k0 + kFloatLanes * j + i;
        for (int64_t lane = 0; lane < lanes; ++lane) {
          std::memcpy(&out[lane], first + lane * row_bytes + c * sizeof(E),
                      sizeof(E));
        }
      }
    }
  }
}

}  // namespace

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

bool MatMulPrefersPanels(GgmlType type, int64_t cols) {
#if defined(__x86_64__)
  if (MatMulLevel(type) < IsaLevel::kAvx512) return false;
  switch (type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return GetCpuFeatures().avx512_vnni;
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return cols % kFloatLanes == 0;
    default:
      return false;
  }
#else
  (void)type;
  (void)cols;
  return false;
#endif
}

absl::StatusOr<PackedMatrix> PackForMatMul(const WeightView& w) {
  const bool quantized = IsQuantized(w.type);
  const bool kquant = internal::HasKPanels(w.type);
  const bool float_type = w.type == GgmlType::kF32 ||
                          w.type == GgmlType::kF16 || w.type == GgmlType::kBF16;
  if (!(quantized || kquant || float_type) ||
      w.layout != WeightLayout::kRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PackForMatMul: only row-major Q8_0, Q4_0, Q4_K, Q6_K, F32, F16 and "
        "BF16 pack, got ",
        GetGgmlTypeTraits(w.type).name,
        w.layout == WeightLayout::kRows ? "" : " panels"));
  }
  const int64_t multiple = quantized ? kQBlock
                           : kquant  ? internal::kKBlock
                                     : kFloatLanes;
  const absl::StatusOr<uint64_t> row_bytes = GgmlRowBytes(w.type, w.cols);
  if (w.rows <= 0 || w.cols <= 0 || w.cols % multiple != 0 || !row_bytes.ok() ||
      w.row_bytes < *row_bytes || w.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PackForMatMul: bad ", GetGgmlTypeTraits(w.type).name,
        " matrix (columns must be a multiple of ", multiple, "): rows ", w.rows,
        ", cols ", w.cols, ", row_bytes ", w.row_bytes));
  }
  const int64_t panel_bytes = internal::PanelBytes(w.type, w.cols);
  const size_t bytes = PackedMatrixBytes(w);
  uint8_t* out = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  if (out == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("PackForMatMul: cannot allocate ", bytes, " bytes"));
  }
  PackedMatrix packed;
  packed.data_.reset(out);
  packed.bytes_ = bytes;
  std::memset(out, 0, bytes);  // padding rows and an odd last block
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  if (kquant) {
    for (int64_t r = 0; r < w.rows; ++r) {
      CopyKRow(w.type, w.cols, r % kPanelRows, /*pack=*/true,
               src + r * w.row_bytes, out + r / kPanelRows * panel_bytes);
    }
  } else if (!quantized) {
    const size_t eb = GetGgmlTypeTraits(w.type).type_size;
    for (int64_t p = 0; p * kPanelRows < w.rows; ++p) {
      if (eb == 4) {
        PackFloatPanel<uint32_t>(src, w.row_bytes, w.rows, w.cols, p,
                                 out + p * panel_bytes);
      } else {
        PackFloatPanel<uint16_t>(src, w.row_bytes, w.rows, w.cols, p,
                                 out + p * panel_bytes);
      }
    }
  }
  for (int64_t r = 0; quantized && r < w.rows; ++r) {
    uint8_t* panel = out + r / kPanelRows * panel_bytes;
    const int64_t lane = r % kPanelRows;
    const uint8_t* row = src + r * w.row_bytes;
    {
      const size_t block_bytes = GetGgmlTypeTraits(w.type).type_size;
      for (int64_t b = 0; b < w.cols / kQBlock; ++b) {
        const uint8_t* block = row + b * block_bytes;
        std::memcpy(panel + ScaleOffset(w.type, b, lane), block, 2);
        for (int64_t q = 0; q < QuadsPerBlock(w.type); ++q) {
          uint8_t* dst = panel + QuadOffset(w.type, b, q, lane);
          for (int i = 0; i < 4; ++i) {
            dst[i] = block[2 + 4 * q + i] ^ QuadXor(w.type);
          }
        }
      }
    }
  }
  packed.view_ = w;
  packed.view_.data = out;
  packed.view_.layout = WeightLayout::kPanels;
  return packed;
}

uint64_t PackedMatrixBytes(const WeightView& w) {
  // A multiple of 64: a block pair, or 16 rows x 16 columns.
  return static_cast<uint64_t>(internal::PanelCount(w.rows) *
                               internal::PanelBytes(w.type, w.cols));
}

namespace internal {

int64_t PanelBytes(GgmlType type, int64_t cols) {
  if (IsQuantized(type)) return (cols / kQBlock + 1) / 2 * PanelPairBytes(type);
  if (HasKPanels(type)) return cols / kKBlock * KPanelBlockBytes(type);
  return cols * kPanelRows *
         static_cast<int64_t>(GetGgmlTypeTraits(type).type_size);
}

void UnpackPanelRows(GgmlType type, const uint8_t* panels, int64_t cols,
                     int64_t r0, int64_t nr, uint8_t* out) {
  const int64_t panel_bytes = PanelBytes(type, cols);
  const size_t row_bytes = *GgmlRowBytes(type, cols);
  for (int64_t i = 0; i < nr; ++i) {
    const int64_t r = r0 + i;
    const uint8_t* panel = panels + r / kPanelRows * panel_bytes;
    const int64_t lane = r % kPanelRows;
    uint8_t* row = out + i * row_bytes;
    if (HasKPanels(type)) {
      CopyKRow(type, cols, lane, /*pack=*/false, panel, row);
    } else if (IsQuantized(type)) {
      const size_t block_bytes = GetGgmlTypeTraits(type).type_size;
      for (int64_t b = 0; b < cols / kQBlock; ++b) {
        uint8_t* block = row + b * block_bytes;
        std::memcpy(block, panel + ScaleOffset(type, b, lane), 2);
        for (int64_t q = 0; q < QuadsPerBlock(type); ++q) {
          const uint8_t* src = panel + QuadOffset(type, b, q, lane);
          for (int j = 0; j < 4; ++j) {
            block[2 + 4 * q + j] = src[j] ^ QuadXor(type);
          }
        }
      }
    } else {
      const size_t eb = GetGgmlTypeTraits(type).type_size;
      for (int64_t c = 0; c < cols; ++c) {
        std::memcpy(row + c * eb, panel + FloatOffset(cols, c, lane) * eb, eb);
      }
    }
  }
}

}  // namespace internal
}  // namespace paceline::engine::cpu
