#ifndef PACELINE_ENGINE_CPU_KERNELS_VECTOR_MATH_H_
#define PACELINE_ENGINE_CPU_KERNELS_VECTOR_MATH_H_

// Element-wise math over float rows at the CPU's instruction-set level
// (EffectiveIsaLevel()), for the engine's activations.

#include <cstdint>

namespace paceline::engine::cpu {

// y[i] = exp(x[i]) for i < n; y may be x. AVX2 / AVX-512: the attention
// kernels' exp (within 2 ulp of the correctly rounded result, 0 below about
// -103.97, +inf above about 88.72, NaN for NaN); scalar: std::exp.
void ExpRow(const float* x, int64_t n, float* y);

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_KERNELS_VECTOR_MATH_H_
