// KV pager costs at serving scale: 1,024 sequences of 2,048-token prompts,
// block size 16 (128 blocks per prompt), on a pool big enough to hold them
// all. Each benchmark reports items_per_second for its natural unit (a
// sequence admitted, a decode step of all sequences, a lookup). Results go
// to bench/RESULTS.md.

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "kvpager/block_hash.h"
#include "kvpager/kv_pager.h"

namespace paceline::kvpager {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int kSequences = 1024;
constexpr int kPromptTokens = 2048;
constexpr int kDecodeTokens = 512;  // generated per sequence between resets
constexpr int32_t kNumBlocks =
    kSequences * ((kPromptTokens + kDecodeTokens) / kBlockSize + 2);

std::vector<std::vector<int32_t>> MakePrompts(int count, int tokens,
                                              uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> prompts(count);
  for (std::vector<int32_t>& p : prompts) {
    p.resize(tokens);
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % 32000);
  }
  return prompts;
}

std::unique_ptr<KvPager> MakePager() {
  return std::move(*KvPager::Create(kNumBlocks, kBlockSize));
}

BlockLease AdmitComputed(KvPager& pager, const std::vector<int32_t>& prompt,
                         const std::string& salt) {
  BlockLease lease = std::move(*pager.Allocate(prompt, salt));
  (void)pager.MarkComputed(&lease, lease.num_tokens());
  return lease;
}

// One 16-token block key.
void BM_HashBlock(benchmark::State& state) {
  const std::vector<int32_t> tokens = MakePrompts(1, kBlockSize, 1)[0];
  BlockKey key = HashSalt("tenant");
  for (auto _ : state) {
    key = HashBlock(key, key, tokens);
    benchmark::DoNotOptimize(key);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HashBlock);

// Admission that misses: 1,024 sequences allocated (128 new blocks each),
// marked computed (128 blocks hashed and registered each), then freed
// into the cache. A new salt per round, so every round misses and evicts
// the previous round's cached blocks. Item = one sequence's cycle.
void BM_AdmitComputeFreeMiss(benchmark::State& state) {
  auto pager = MakePager();
  const auto prompts = MakePrompts(kSequences, kPromptTokens, 2);
  std::vector<BlockLease> leases(kSequences);
  int round = 0;
  for (auto _ : state) {
    const std::string salt = "tenant-" + std::to_string(round++);
    for (int i = 0; i < kSequences; ++i) {
      leases[i] = AdmitComputed(*pager, prompts[i], salt);
    }
    for (BlockLease& lease : leases) lease.Reset();
  }
  state.SetItemsProcessed(state.iterations() * kSequences);
  state.counters["evictions"] = static_cast<double>(pager->Stats().evictions);
}
BENCHMARK(BM_AdmitComputeFreeMiss)->Unit(benchmark::kMillisecond);

// Admission that hits: the same 1,024 prompts, all cached; each admission
// shares 127 blocks and recomputes the last (the last token is always
// computed). Item = one sequence's cycle.
void BM_AdmitComputeFreeHit(benchmark::State& state) {
  auto pager = MakePager();
  const auto prompts = MakePrompts(kSequences, kPromptTokens, 3);
  std::vector<BlockLease> leases(kSequences);
  for (int i = 0; i < kSequences; ++i) {
    leases[i] = AdmitComputed(*pager, prompts[i], "tenant");
  }
  for (BlockLease& lease : leases) lease.Reset();
  for (auto _ : state) {
    for (int i = 0; i < kSequences; ++i) {
      leases[i] = AdmitComputed(*pager, prompts[i], "tenant");
    }
    for (BlockLease& lease : leases) lease.Reset();
  }
  const PagerStats s = pager->Stats();
  state.SetItemsProcessed(state.iterations() * kSequences);
  state.counters["hit_rate"] =
      static_cast<double>(s.prefix_hit_tokens) / s.prefix_query_tokens;
}
BENCHMARK(BM_AdmitComputeFreeHit)->Unit(benchmark::kMillisecond);

// A decode step of 1,024 running sequences: per sequence CanAppend(1),
// Append(1 token) and MarkComputed (the previous token's block becomes
// cacheable when it fills). Every kDecodeTokens steps the sequences are
// freed and re-admitted from the cache, outside the timing. Item = one
// step of all 1,024 sequences.
void BM_DecodeStep(benchmark::State& state) {
  auto pager = MakePager();
  const auto prompts = MakePrompts(kSequences, kPromptTokens, 4);
  std::vector<BlockLease> leases(kSequences);
  auto admit_all = [&] {
    for (BlockLease& lease : leases) lease.Reset();
    for (int i = 0; i < kSequences; ++i) {
      leases[i] = AdmitComputed(*pager, prompts[i], "tenant");
    }
  };
  admit_all();
  std::mt19937 rng(5);
  std::vector<BlockCopy> copies;
  int steps = 0;
  for (auto _ : state) {
    if (steps++ == kDecodeTokens) {
      state.PauseTiming();
      admit_all();
      steps = 1;
      state.ResumeTiming();
    }
    for (BlockLease& lease : leases) {
      if (!pager->CanAppend(lease, 1)) state.SkipWithError("pool exhausted");
      const int32_t token = static_cast<int32_t>(rng() % 32000);
      (void)pager->Append(&lease, {token}, &copies);
      (void)pager->MarkComputed(&lease, lease.num_tokens() - 1);
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["seq_steps_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kSequences,
                         benchmark::Counter::kIsRate);
  for (BlockLease& lease : leases) lease.Reset();
}
BENCHMARK(BM_DecodeStep)->Unit(benchmark::kMicrosecond);

// The lookup alone (CachedPrefixTokens) for a cached 2,048-token prompt:
// 128 keys hashed and 127 verified hits. Item = one lookup.
void BM_PrefixLookup(benchmark::State& state) {
  auto pager = MakePager();
  const auto prompts = MakePrompts(kSequences, kPromptTokens, 6);
  for (const auto& prompt : prompts) {
    BlockLease lease = AdmitComputed(*pager, prompt, "tenant");
  }
  size_t i = 0;
  int64_t hit_tokens = 0;
  for (auto _ : state) {
    hit_tokens += pager->CachedPrefixTokens(prompts[i], "tenant");
    i = (i + 1) % prompts.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["hit_tokens"] =
      static_cast<double>(hit_tokens) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_PrefixLookup)->Unit(benchmark::kMicrosecond);

// Fork a running 2,049-token sequence (n > 1 sampling), append one token
// to the fork (copy-on-write of the shared partial block), free the fork.
// Item = one fork cycle.
void BM_ForkAppendFree(benchmark::State& state) {
  auto pager = MakePager();
  const auto prompts = MakePrompts(1, kPromptTokens + 1, 7);
  BlockLease parent = AdmitComputed(*pager, prompts[0], "tenant");
  std::vector<BlockCopy> copies;
  for (auto _ : state) {
    BlockLease fork = std::move(*pager->Fork(parent));
    (void)pager->Append(&fork, {1}, &copies);
    copies.clear();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ForkAppendFree);

}  // namespace
}  // namespace paceline::kvpager

BENCHMARK_MAIN();
