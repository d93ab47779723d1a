#include "engine/cpu/kernels/vector_math.h"

#include <cmath>
#include <cstdint>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/attention_internal.h"

namespace paceline::engine::cpu {

void ExpRow(const float* x, int64_t n, float* y) {
#if defined(__x86_64__)
  switch (EffectiveIsaLevel()) {
    case IsaLevel::kAvx512:
      internal::ExpAvx512(x, n, y);
      return;
    case IsaLevel::kAvx2:
      internal::ExpAvx2(x, n, y);
      return;
    case IsaLevel::kScalar:
      break;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

}  // namespace paceline::engine::cpu
