#ifndef PACELINE_KVPAGER_PAGER_STATS_H_
#define PACELINE_KVPAGER_PAGER_STATS_H_

// The pager's narrow metrics interface: a plain snapshot the serving loop
// reads after each step (gauges as they are, counters as deltas), and an
// optional observer told of events as they happen. No Prometheus here: the
// metrics module maps these onto its families (DESIGN.md §3).

#include <cstdint>

namespace paceline::kvpager {

struct PagerStats {
  int32_t block_size = 0;

  // Gauges, in blocks: free + used + cached == total at all times.
  int64_t total_blocks = 0;
  int64_t free_blocks = 0;    // no content, ready to hand out
  int64_t used_blocks = 0;    // referenced by at least one live lease
  int64_t cached_blocks = 0;  // unreferenced prefix-cache blocks (evictable)

  // Gauges, in recurrent-state slots (hybrid models; all 0 without):
  // free + held == total at all times.
  int64_t total_state_slots = 0;
  int64_t free_state_slots = 0;
  // Of the held ones, those keeping cached prefixes' state (snapshots).
  int64_t state_snapshots = 0;

  // Counters since the pager was created.
  int64_t prefix_queries = 0;       // admissions (Allocate) that looked up
  int64_t prefix_query_tokens = 0;  // their prompt tokens
  int64_t prefix_hit_tokens = 0;    // of which served from the cache
  int64_t evictions = 0;   // cached blocks reclaimed (allocation, EvictCached)
  int64_t cow_copies = 0;  // copy-on-write block copies handed out
  int64_t state_copies = 0;  // state slot copies handed out (forks, snapshots)
  int64_t state_snapshot_hits = 0;  // admissions that started from one
  // Prefix snapshots replaced, or whose slot went to a sequence.
  int64_t state_snapshot_evictions = 0;
};

// Events, called synchronously on the pager's thread from inside the pager
// call that caused them. Implementations must be cheap and must not call
// back into the pager. Default implementations do nothing.
class PagerObserver {
 public:
  virtual ~PagerObserver() = default;

  // One admission: `query_tokens` prompt tokens, `hit_tokens` of them found
  // in the cache.
  virtual void OnPrefixQuery(int64_t query_tokens, int64_t hit_tokens) {
    (void)query_tokens;
    (void)hit_tokens;
  }
  // `blocks` cached blocks were evicted.
  virtual void OnEviction(int64_t blocks) { (void)blocks; }
  // One copy-on-write copy was handed out.
  virtual void OnCopyOnWrite() {}
};

}  // namespace paceline::kvpager

#endif  // PACELINE_KVPAGER_PAGER_STATS_H_
