#ifndef PACELINE_BENCH_PEAK_COMPUTE_H_
#define PACELINE_BENCH_PEAK_COMPUTE_H_

// The arithmetic ceilings the CPU benchmarks divide their work by: the
// sustained rate of the instructions the matmul kernels use, over every
// thread of a pool, measured by a probe that keeps 12 independent register
// chains per thread busy (enough to cover the latency of a fused
// multiply-add on current cores) and does nothing else.
//   FMA   FP32 fused multiply-adds: vfmadd231ps on zmm (avx512) or ymm
//         (avx2), 2 FLOPs per lane; scalar: plain float a * b + c.
//   int8  byte dot products into int32: vpdpbusd on zmm (AVX-512 VNNI),
//         else vpmaddubsw + vpmaddwd + vpaddd on ymm (avx2: what the AVX2
//         int8 kernels issue), 2 ops (multiply, add) per byte product.
// The level is the kernels' (engine/cpu/cpu_features.h), so a PACELINE_CPU_ISA
// cap lowers the ceiling with the kernels.

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/thread_pool.h"

namespace paceline::bench {

// What a probe ran and measured.
struct Peak {
  const char* instruction = "";  // e.g. "vfmadd231ps zmm"
  double ops_per_s = 0;          // FLOP/s or int8 OP/s, all threads
};

// The best of a few passes of about `seconds` / 4 each.
Peak MeasureFmaPeak(engine::cpu::ThreadPool& pool, double seconds = 0.4);
Peak MeasureInt8Peak(engine::cpu::ThreadPool& pool, double seconds = 0.4);

}  // namespace paceline::bench

#endif  // PACELINE_BENCH_PEAK_COMPUTE_H_
