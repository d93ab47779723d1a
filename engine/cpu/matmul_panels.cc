// The panel layout of Q8_0 weights (matmul_internal.h): packing at load,
// unpacking for ISA levels without a panel kernel. Portable C++: packing
// runs once per matrix, unpacking only on the fallback path.

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

}  // namespace

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

bool MatMulPrefersPanels(GgmlType type) {
#if defined(__x86_64__)
  return type == GgmlType::kQ8_0 &&
         EffectiveIsaLevel() >= IsaLevel::kAvx512 && EffectiveAvx512Vnni();
#else
  (void)type;
  return false;
#endif
}

absl::StatusOr<PackedMatrix> PackForMatMul(const WeightView& w) {
  if (w.type != GgmlType::kQ8_0 || w.layout != WeightLayout::kRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("PackForMatMul: only row-major Q8_0 packs, got ",
                     GetGgmlTypeTraits(w.type).name,
                     w.layout == WeightLayout::kRows ? "" : " panels"));
  }
  if (w.rows <= 0 || w.cols <= 0 || w.cols % kQBlock != 0 ||
      w.row_bytes < static_cast<size_t>(w.cols / kQBlock * kQ8_0BlockBytes) ||
      w.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PackForMatMul: bad Q8_0 matrix: rows ", w.rows, ", cols ", w.cols,
        ", row_bytes ", w.row_bytes));
  }
  const int64_t panel_bytes = internal::PanelBytes(w.cols);
  const size_t bytes =
      static_cast<size_t>(internal::PanelCount(w.rows) * panel_bytes);
  uint8_t* out = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  if (out == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("PackForMatMul: cannot allocate ", bytes, " bytes"));
  }
  PackedMatrix packed;
  packed.data_.reset(out);
  packed.bytes_ = bytes;
  std::memset(out, 0, bytes);  // padding rows and an odd last block
  const int64_t nb = w.cols / kQBlock;
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r) {
    uint8_t* panel = out + r / kPanelRows * panel_bytes;
    const int64_t lane = r % kPanelRows;
    const uint8_t* row = src + r * w.row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* block = row + b * kQ8_0BlockBytes;
      std::memcpy(panel + ScaleOffset(b, lane), block, 2);
      for (int64_t q = 0; q < 8; ++q) {
        uint8_t* dst = panel + QuadOffset(b, q, lane);
        for (int i = 0; i < 4; ++i) dst[i] = block[2 + 4 * q + i] ^ 0x80;
      }
    }
  }
  packed.view_ = w;
  packed.view_.data = out;
  packed.view_.layout = WeightLayout::kPanels;
  return packed;
}

namespace internal {

void UnpackPanelRows(const uint8_t* panels, int64_t cols, int64_t r0,
                     int64_t nr, uint8_t* out) {
  const int64_t panel_bytes = PanelBytes(cols);
  const int64_t nb = cols / kQBlock;
  for (int64_t i = 0; i < nr; ++i) {
    const int64_t r = r0 + i;
    const uint8_t* panel = panels + r / kPanelRows * panel_bytes;
    const int64_t lane = r % kPanelRows;
    uint8_t* row = out + i * nb * kQ8_0BlockBytes;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* block = row + b * kQ8_0BlockBytes;
      std::memcpy(block, panel + ScaleOffset(b, lane), 2);
      for (int64_t q = 0; q < 8; ++q) {
        const uint8_t* src = panel + QuadOffset(b, q, lane);
        for (int j = 0; j < 4; ++j) block[2 + 4 * q + j] = src[j] ^ 0x80;
      }
    }
  }
}

}  // namespace internal
}  // namespace paceline::engine::cpu
