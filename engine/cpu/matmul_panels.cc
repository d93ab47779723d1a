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
#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_internal.h"
#include "engine/ggml_type.h"

namespace paceline::engine::cpu {
namespace {

using internal::kPanelPairBytes;
using internal::kPanelQuadBytes;
using internal::kPanelRows;
using internal::kQ8_0BlockBytes;
using internal::kQBlock;

// Where block b of panel row `lane` keeps quad q and its scale, from the
// panel's first byte.
int64_t QuadOffset(int64_t b, int64_t q, int64_t lane) {
  return b / 2 * kPanelPairBytes + b % 2 * kPanelQuadBytes + q * 64 + lane * 4;
}
int64_t ScaleOffset(int64_t b, int64_t lane) {
  return b / 2 * kPanelPairBytes + 2 * kPanelQuadBytes + b % 2 * 32 + lane * 2;
}

// Floats: the element index of column c of panel row `lane`.
constexpr int64_t kFloatLanes = 16;
int64_t FloatOffset(int64_t cols, int64_t c, int64_t lane) {
  const int64_t k0 = c / internal::kFloatPanelCols * internal::kFloatPanelCols;
  const int64_t n = std::min(internal::kFloatPanelCols, cols - k0);
  const int64_t i = (c - k0) % kFloatLanes, j = (c - k0) / kFloatLanes;
  return k0 * kPanelRows + (i * (n / kFloatLanes) + j) * kPanelRows + lane;
}

}  // namespace

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

bool MatMulPrefersPanels(GgmlType type, int64_t cols) {
#if defined(__x86_64__)
  if (EffectiveIsaLevel() < IsaLevel::kAvx512) return false;
  switch (type) {
    case GgmlType::kQ8_0:
      return EffectiveAvx512Vnni();
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
  const bool q8 = w.type == GgmlType::kQ8_0;
  const bool float_type = w.type == GgmlType::kF32 ||
                          w.type == GgmlType::kF16 ||
                          w.type == GgmlType::kBF16;
  if (!(q8 || float_type) || w.layout != WeightLayout::kRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PackForMatMul: only row-major Q8_0, F32, F16 and BF16 pack, got ",
        GetGgmlTypeTraits(w.type).name,
        w.layout == WeightLayout::kRows ? "" : " panels"));
  }
  const int64_t multiple = q8 ? kQBlock : kFloatLanes;
  const absl::StatusOr<uint64_t> row_bytes = GgmlRowBytes(w.type, w.cols);
  if (w.rows <= 0 || w.cols <= 0 || w.cols % multiple != 0 || !row_bytes.ok() ||
      w.row_bytes < *row_bytes || w.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PackForMatMul: bad ", GetGgmlTypeTraits(w.type).name,
        " matrix (columns must be a multiple of ", multiple, "): rows ",
        w.rows, ", cols ", w.cols, ", row_bytes ", w.row_bytes));
  }
  const int64_t panel_bytes = internal::TypePanelBytes(w.type, w.cols);
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
  for (int64_t r = 0; r < w.rows; ++r) {
    uint8_t* panel = out + r / kPanelRows * panel_bytes;
    const int64_t lane = r % kPanelRows;
    const uint8_t* row = src + r * w.row_bytes;
    if (q8) {
      for (int64_t b = 0; b < w.cols / kQBlock; ++b) {
        const uint8_t* block = row + b * kQ8_0BlockBytes;
        std::memcpy(panel + ScaleOffset(b, lane), block, 2);
        for (int64_t q = 0; q < 8; ++q) {
          uint8_t* dst = panel + QuadOffset(b, q, lane);
          for (int i = 0; i < 4; ++i) dst[i] = block[2 + 4 * q + i] ^ 0x80;
        }
      }
    } else {
      const size_t eb = GetGgmlTypeTraits(w.type).type_size;
      for (int64_t c = 0; c < w.cols; ++c) {
        std::memcpy(panel + FloatOffset(w.cols, c, lane) * eb, row + c * eb,
                    eb);
      }
    }
  }
  packed.view_ = w;
  packed.view_.data = out;
  packed.view_.layout = WeightLayout::kPanels;
  return packed;
}

uint64_t PackedMatrixBytes(const WeightView& w) {
  // A multiple of 64: 1088 per Q8_0 block pair, 16 rows x 16 columns.
  return static_cast<uint64_t>(internal::PanelCount(w.rows) *
                               internal::TypePanelBytes(w.type, w.cols));
}

namespace internal {

int64_t TypePanelBytes(GgmlType type, int64_t cols) {
  if (type == GgmlType::kQ8_0) return PanelBytes(cols);
  return cols * kPanelRows *
         static_cast<int64_t>(GetGgmlTypeTraits(type).type_size);
}

void UnpackPanelRows(GgmlType type, const uint8_t* panels, int64_t cols,
                     int64_t r0, int64_t nr, uint8_t* out) {
  const int64_t panel_bytes = TypePanelBytes(type, cols);
  const size_t row_bytes = *GgmlRowBytes(type, cols);
  for (int64_t i = 0; i < nr; ++i) {
    const int64_t r = r0 + i;
    const uint8_t* panel = panels + r / kPanelRows * panel_bytes;
    const int64_t lane = r % kPanelRows;
    uint8_t* row = out + i * row_bytes;
    if (type == GgmlType::kQ8_0) {
      for (int64_t b = 0; b < cols / kQBlock; ++b) {
        uint8_t* block = row + b * kQ8_0BlockBytes;
        std::memcpy(block, panel + ScaleOffset(b, lane), 2);
        for (int64_t q = 0; q < 8; ++q) {
          const uint8_t* src = panel + QuadOffset(b, q, lane);
          for (int j = 0; j < 4; ++j) block[2 + 4 * q + j] = src[j] ^ 0x80;
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
