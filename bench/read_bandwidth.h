#ifndef PACELINE_BENCH_READ_BANDWIDTH_H_
#define PACELINE_BENCH_READ_BANDWIDTH_H_

// The memory roofline the CPU benchmarks divide their weight traffic by: a
// read-only sum over a buffer, on a thread pool, each thread walking its
// share as 1 stream (ANCHORS.md's kernel) or as 4 side-by-side streams
// (more independent prefetch streams: ~25% faster on the project's VMs).
// AVX2 where present, so the adds never limit the rate.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/cpu/thread_pool.h"

namespace paceline::bench {

// A buffer of `bytes` (a multiple of 8), every page touched, so that no
// zero-page mapping flatters the first pass.
const uint64_t* ReadBuffer(size_t bytes);

// One pass over the first `bytes` of ReadBuffer(bytes) on `pool`'s threads.
void ReadPass(engine::cpu::ThreadPool& pool, size_t bytes, int streams,
              std::vector<uint64_t>& partial);

// Bytes/s of the best of `passes` 4-stream passes over `bytes`.
double MeasureReadBandwidth(engine::cpu::ThreadPool& pool, size_t bytes,
                            int passes);

}  // namespace paceline::bench

#endif  // PACELINE_BENCH_READ_BANDWIDTH_H_
