#include "engine/model/weight_view.h"

namespace paceline::engine {

bool IsMatMulWeightType(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 ||
         type == GgmlType::kBF16 || type == GgmlType::kMXFP4 ||
         IsBlockMatMulType(type);
}

}  // namespace paceline::engine
