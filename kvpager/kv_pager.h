#ifndef PACELINE_KVPAGER_KV_PAGER_H_
#define PACELINE_KVPAGER_KV_PAGER_H_

// KvPager: the PagedAttention-style KV block allocator the scheduler talks
// to. It speaks in check/act pairs (nano-vllm's block manager):
//
//   CanAllocate(prompt, salt) / Allocate   admit a sequence
//   CanAppend(lease, n)       / Append     grow it by n tokens
//   MarkComputed(lease, n)                 its first n tokens' K/V exist
//   Truncate(lease, n)                     drop its uncomputed tail
//   CanFork(lease)            / Fork       share it (n > 1 samples)
//   CanSnapshot(lease)        / Snapshot   keep its state (speculation),
//   RestoreSnapshot / DropSnapshot           then go back to it or not
//   Free(lease), or destroy the lease      finish, cancel or preempt it
//
// and hands out block tables as values (BlockLease::table()).
//
// Reservation-free: Allocate takes blocks for the prompt only; a sequence
// then grows one block at a time, taking a new block only when its last one
// is full. When no block is free, allocation evicts the least recently used
// cached block. A check that passes guarantees the act right after it; an
// act that cannot be covered fails with ResourceExhausted and changes
// nothing (never a half-done allocation).
//
// Prefix cache (prefix_cache.h). A full block's key is H(parent key, salt,
// its token ids). Allocate shares the longest chain of cached full blocks
// of the prompt under the same salt. Salt = the tenant by default, so
// tenants never share cache (no cross-tenant timing side channel); an
// operator-declared shared scope (a public system prompt) passes a common
// salt. Hits always leave the prompt's last token to compute, because the
// engine must run it to produce logits: at most floor((len - 1) / B) blocks
// are shared, so a block-aligned prompt recomputes its whole last block
// (as vLLM does), and no sequence ever writes into a block it got from the
// cache.
//
// A full block becomes cacheable only once it is computed: the scheduler
// calls MarkComputed(lease, num_computed_tokens) after each engine step
// (prefill chunks and decode tokens alike, so blocks filled by generated
// tokens become cacheable too). Never mark tokens whose K/V may not be
// written: a lease preempted mid-prefill would otherwise leave garbage in
// the cache.
//
// Copy-on-write: Fork shares every block, including a partial last block.
// The first Append into a shared partial block moves the appender onto a
// fresh copy and returns the (src, dst) pair for the engine to copy
// (block_table.h says when). Full blocks are never written, so they are
// shared without copies.
//
// Layer groups (engine/model/kv_layout.h). A pager may serve several
// groups of layers over its one pool: a block belongs to one group at a
// time and holds that group's layers; a lease holds one table per group
// (BlockLease::group_tables) and each group has its own prefix-cache
// entries (a hit is the longest prefix every group has). A full group
// (window 0) keeps every block, as above. A windowed group (window W: a
// position p attends to [p - W + 1, p]) keeps only what later positions
// can read: MarkComputed(n) gives back its blocks wholly before n - W + 1
// (to the prefix cache's LRU list if registered, else free), and it takes
// blocks only for the positions a step computes: Allocate for the prompt's
// first `first_step` uncached tokens, Append for the appended tokens,
// Cover for a later chunk of the prompt. So a long sequence holds about
// W / block_size + 1 blocks in each windowed group (BlocksToHold). What
// keeps more than the window, by design: a prefix-cache hit needs every
// group's chain from the first block, so a windowed group's early blocks,
// given back to the LRU list, are what a later hit on that prefix needs:
// each hit moves them to the recent end (first block last), so a prefix
// in use stays whole, and one left alone loses them first (which costs
// hits, never correctness). An uncached prompt (MarkComputed with cache
// false) still gives its blocks back.
//
// Recurrent-state slots (hybrid models: Gated DeltaNet layers beside
// attention layers, engine/engine.h Engine::num_state_slots). A pager
// created with slots owns that pool of slot ids beside its blocks, and
// every lease holds one slot (BlockLease::state_slot) from Allocate until
// it is reset or destroyed: finishing, cancelling or preempting a sequence
// frees its slot at once, as it frees its blocks. Admission needs a free
// slot (CanAllocate is false, Allocate ResourceExhausted, without one). The
// engine zeroes the slot where a sequence starts at position 0 and leaves
// in it the state after the sequence's computed tokens; the pager never
// sees the content. Fork gives the fork a slot of its own and reports a
// StateCopy (source's slot -> fork's slot) that the engine must run before
// its next forward pass (block_table.h). Snapshot gives a lease a second
// slot with a copy of its state (a StateCopy again), so that a step that
// may have to be undone (speculative drafts) can go back to it:
// RestoreSnapshot makes the copy the lease's state (no copy: the slot ids
// swap; the advanced state's slot is freed), DropSnapshot frees it.
// Prefix caching with slots: a cached prefix is only usable with the
// recurrent state at its end, so the pager keeps state snapshots of
// cached prefixes (EnableStateSnapshots: llama.cpp's context checkpoints
// more than vLLM's state per block, see DESIGN notes in the README's
// "Hybrid models"): KeepStateSnapshot copies a sequence's state at a
// block boundary into a slot no sequence holds, keyed by the group-0
// block ending there and valid while that block holds the same cache
// entry; a lookup's hit is cut to the last block of its chain that has a
// snapshot, and Allocate reports the copy of that snapshot into the new
// lease's slot. Snapshots are a cache: a sequence that needs a slot
// (Allocate, Fork, Snapshot) takes the least recently used snapshot's when
// none is free. Without snapshots every lookup finds 0 cached tokens and
// MarkComputed registers nothing: the whole prompt is computed from
// position 0.
//
// Threading: none inside. The serving loop's engine thread owns the pager
// and every lease (DESIGN.md §2): all calls, and lease destruction, happen
// on that thread, so there are no locks. The pager must outlive its leases
// and must not move (Create returns it on the heap).
//
// Errors: InvalidArgument for bad arguments (an empty prompt, a lease that
// is empty or from another pager, a count out of range); ResourceExhausted
// when the pool cannot cover an act. No call aborts on bad input.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kvpager/block_hash.h"
#include "kvpager/block_lease.h"
#include "kvpager/block_pool.h"
#include "kvpager/block_table.h"
#include "kvpager/pager_stats.h"
#include "kvpager/prefix_cache.h"
#include "kvpager/state_slot_pool.h"

namespace paceline::kvpager {

class KvPager {
 public:
  // The longest sequence a lease may hold.
  static constexpr int32_t kMaxSequenceTokens = int32_t{1} << 30;

  // A pager over `num_blocks` blocks of `block_size` tokens. num_blocks
  // comes from the memory planner (KV budget / bytes per block).
  // InvalidArgument unless both are >= 1 and num_blocks * block_size fits
  // in int32 (every KV slot has an int32 index). `hash` is for tests only
  // (block_hash.h); the cache stays exact whatever it returns.
  static absl::StatusOr<std::unique_ptr<KvPager>> Create(
      int32_t num_blocks, int32_t block_size, BlockHashFn hash = &HashBlock);
  // The same over layer groups (see the top): group_windows[g] is group
  // g's window in positions, 0 for full history; at least one group, none
  // negative (InvalidArgument otherwise). {0} is the pager above.
  // num_state_slots: the recurrent-state slots (see the top), the engine's
  // Engine::num_state_slots(); 0 = none (a model without recurrent state),
  // negative is InvalidArgument.
  static absl::StatusOr<std::unique_ptr<KvPager>> Create(
      int32_t num_blocks, int32_t block_size,
      std::vector<int32_t> group_windows, int32_t num_state_slots = 0,
      BlockHashFn hash = &HashBlock);

  // Blocks one group of window `window` holds for a sequence of
  // `positions` positions when a step adds at most `step_tokens`: all of
  // them for a full group; for a windowed one at most those of the window
  // before the step's first position and of the step's positions.
  static int64_t GroupBlocksToHold(int32_t window, int32_t block_size,
                                   int64_t positions, int32_t step_tokens);

  KvPager(const KvPager&) = delete;
  KvPager& operator=(const KvPager&) = delete;
  // Precondition: every lease has been destroyed.
  ~KvPager();

  int32_t block_size() const { return pool_.block_size(); }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_groups() const { return static_cast<int32_t>(windows_.size()); }
  int32_t group_window(int32_t group) const { return windows_[group]; }
  // Recurrent-state slots (see the top): all of them, and those free now.
  int32_t num_state_slots() const { return slots_.num_slots(); }
  int32_t num_free_state_slots() const { return slots_.num_free(); }
  // Free slots plus those prefix snapshots hold, which a sequence takes
  // when it needs one (see the top).
  int32_t num_available_state_slots() const { return AvailableStateSlots(); }
  // Whether cached prefixes keep state snapshots (EnableStateSnapshots).
  bool state_snapshots() const { return !snapshots_.empty(); }
  // The most blocks one lease of `positions` positions holds at once, over
  // every group, when each step adds at most `step_tokens` (see the top).
  int64_t BlocksToHold(int64_t positions, int32_t step_tokens) const;

  // --- Admission -------------------------------------------------------

  // The lookup alone: how many leading tokens of `prompt` Allocate would
  // take from the cache right now (a multiple of block_size, at most
  // prompt.size() - 1; 0 for an empty prompt, and always 0 with state
  // slots: see the top). Changes nothing, counts nothing.
  int32_t CachedPrefixTokens(absl::Span<const int32_t> prompt,
                             absl::string_view salt) const;

  // Whether Allocate(prompt, salt, first_step) would succeed now: the
  // blocks the prompt needs beyond its cache hits are at most the free
  // blocks plus the cached ones that are not among the hits, and with
  // state slots one slot is free. False for an invalid prompt.
  bool CanAllocate(absl::Span<const int32_t> prompt, absl::string_view salt,
                   int32_t first_step = kMaxSequenceTokens) const;

  // A lease whose table covers the prompt: shared cache hits first
  // (num_cached_tokens()), then new blocks holding the rest of the prompt;
  // with state slots, and a slot (BlockLease::state_slot) whose state the
  // engine zeroes at position 0.
  // A successful Allocate counts one prefix query. InvalidArgument for an
  // empty prompt or one longer than kMaxSequenceTokens; ResourceExhausted,
  // with nothing changed, when !CanAllocate. Being all-or-nothing, Allocate
  // is its own check: calling it directly walks the prompt's chain once
  // instead of twice (CanAllocate walks it too).
  // Windowed groups take blocks only for the first `first_step` uncached
  // prompt tokens (see the top); Cover takes the rest as they are computed.
  // With state slots and snapshots (EnableStateSnapshots), a hit ends at a
  // block with a snapshot, whose state is copied into the lease's slot:
  // {snapshot's slot, lease's slot} is appended to `*state_copies`, to run
  // before the next forward pass; without `state_copies` there is no hit.
  absl::StatusOr<BlockLease> Allocate(
      absl::Span<const int32_t> prompt, absl::string_view salt,
      int32_t first_step = kMaxSequenceTokens,
      std::vector<StateCopy>* state_copies = nullptr);

  // --- Growth ----------------------------------------------------------

  // Whether Append of `num_new_tokens` would succeed now: it needs one block
  // per block boundary crossed in each group (a windowed group also those
  // of its uncomputed positions it has not taken yet), plus one per group
  // whose last block is partial and shared (copy-on-write). False for an empty or foreign lease, a negative
  // count, or a length past kMaxSequenceTokens.
  bool CanAppend(const BlockLease& lease, int32_t num_new_tokens) const;

  // Appends `tokens` to the lease's sequence. When its last block is partial
  // and shared, first moves the lease onto a copy and appends {src, dst} to
  // `*copies` (at most one pair per group; `copies` must be non-null).
  // InvalidArgument for an empty or foreign lease, a null `copies` or a
  // length past kMaxSequenceTokens; ResourceExhausted, with nothing
  // changed, when !CanAppend.
  absl::Status Append(BlockLease* lease, absl::Span<const int32_t> tokens,
                      std::vector<BlockCopy>* copies);

  // Whether Cover(lease, end) would succeed now: the blocks windowed
  // groups lack for positions [num_computed_tokens(), end). False for an
  // empty or foreign lease or an end past num_tokens().
  bool CanCover(const BlockLease& lease, int32_t end) const;
  // Gives every windowed group blocks for positions [num_computed_tokens(),
  // end), end <= num_tokens(): a step about to compute them (a prompt's
  // next chunk). A no-op without windowed groups. InvalidArgument as
  // CanCover; ResourceExhausted, with nothing changed, when !CanCover.
  absl::Status Cover(BlockLease* lease, int32_t end);

  // The most tokens Append could add using at most `new_blocks` new blocks
  // (the free slots of the lease's own last blocks, then whole blocks in
  // every group), assuming no copy-on-write.
  int32_t AppendRoom(const BlockLease& lease, int64_t new_blocks) const;

  // Drops the sequence's tokens past `num_tokens` and returns the blocks
  // that only they filled (speculative decoding: the draft tokens a step
  // rejected). Only a tail that is not computed can go: InvalidArgument for
  // an empty or foreign lease or a count outside [num_computed_tokens(),
  // num_tokens()]. The K/V in the kept last block past `num_tokens` are
  // garbage until the positions are written again.
  absl::Status Truncate(BlockLease* lease, int32_t num_tokens);

  // Reports that the K/V of the sequence's first `num_computed_tokens`
  // tokens are written; the full blocks among them enter the prefix cache
  // (unless `cache` is false: a prompt that must not be shared), and
  // windowed groups give back the blocks no later window reaches (see the
  // top). A smaller count than before is a no-op. InvalidArgument for an
  // empty or foreign lease or a count outside [0, num_tokens()].
  absl::Status MarkComputed(BlockLease* lease, int32_t num_computed_tokens,
                            bool cache = true);

  // Whether Fork(lease) would succeed now: a valid lease and, with state
  // slots, a free slot.
  bool CanFork(const BlockLease& lease) const;

  // A second lease on the same blocks (each block's refcount + 1), with the
  // same tokens and progress. Needs no free block. Fork once the source's
  // tokens are computed: K/V written later into a still-shared partial
  // block would be seen by both. With state slots the fork gets a free
  // slot of its own, and {source's slot, fork's slot} is appended to
  // `*state_copies`, which the engine must run before its next forward
  // pass (the source's state, as it is then, becomes the fork's).
  // InvalidArgument for an empty or foreign lease, or a null
  // `state_copies` with state slots (it may be null without);
  // ResourceExhausted, with nothing changed, when no slot is free.
  absl::StatusOr<BlockLease> Fork(
      const BlockLease& lease,
      std::vector<StateCopy>* state_copies = nullptr);

  // --- Recurrent-state snapshots ---------------------------------------

  // Whether Snapshot(lease) would succeed now: a valid lease without a
  // snapshot, in a pager with state slots, and a free slot.
  bool CanSnapshot(const BlockLease& lease) const;
  // Gives the lease a second slot (BlockLease::snapshot_slot) and appends
  // {state_slot, snapshot_slot} to `*state_copies`: run before the next
  // forward pass, it keeps the state as it is then. InvalidArgument for an
  // empty or foreign lease, a pager without state slots, a lease that has
  // a snapshot already or a null `state_copies`; ResourceExhausted, with
  // nothing changed, when no slot is free.
  absl::Status Snapshot(BlockLease* lease,
                        std::vector<StateCopy>* state_copies);
  // The snapshot becomes the lease's state: the slot ids swap and the slot
  // that held the state since is freed. No copy is needed. The caller then
  // recomputes the tokens after the snapshot's position (the engine leaves
  // the slot's state after the tokens it computes). InvalidArgument for an
  // empty or foreign lease or one without a snapshot.
  absl::Status RestoreSnapshot(BlockLease* lease);
  // Frees the lease's snapshot slot, keeping its state. InvalidArgument as
  // RestoreSnapshot.
  absl::Status DropSnapshot(BlockLease* lease);

  // Returns the lease's blocks and state slots (the same as destroying it).
  void Free(BlockLease lease) { lease.Reset(); }

  // --- Recurrent state of cached prefixes ------------------------------

  // Lets up to `count` state slots hold snapshots of cached prefixes'
  // recurrent state (see the top), once, before any lease. InvalidArgument
  // for a count outside [0, num_state_slots()]; FailedPrecondition after
  // leases or a first call.
  absl::Status EnableStateSnapshots(int32_t count);
  // Keeps the lease's recurrent state after its first `end` tokens (a
  // multiple of block_size, computed; the state must be that now) as the
  // snapshot of the cached prefix ending there: {lease's slot, snapshot's
  // slot} is appended to `*state_copies`, to run before the next forward
  // pass. Goes into the snapshot of block `replace` (a sequence's previous
  // one, -1 for none) if there is one, else an empty place, else the
  // least recently used snapshot's; needs a slot no sequence holds.
  // Returns the snapshot's block (the lease's group-0 block ending at
  // `end`), or -1 when nothing is kept: snapshots off, `end` not a
  // registered block of the lease's own chain, or no slot to spare.
  int32_t KeepStateSnapshot(const BlockLease& lease, int32_t end,
                            int32_t replace,
                            std::vector<StateCopy>* state_copies);

  // --- Cache maintenance -----------------------------------------------

  // Evicts up to `max_blocks` cached blocks, least recently used first;
  // returns how many. Counts as evictions.
  int32_t EvictCached(int32_t max_blocks);

  // Drops every prefix-cache entry (cached blocks become free; used blocks
  // stay with their leases but are no longer shared with newcomers). Live
  // leases keep working; those that had registered blocks register nothing
  // more (their chains are gone). Not counted as evictions.
  void ResetPrefixCache();

  // --- Observation -----------------------------------------------------

  PagerStats Stats() const;

  // Optional; `observer` must outlive the pager or be replaced by nullptr.
  void set_observer(PagerObserver* observer) { observer_ = observer; }

  // Read-only internals for tests and debugging; the scheduler and engine
  // use leases and tables only.
  const BlockPool& pool() const { return pool_; }
  const PrefixCache& prefix_cache(int32_t group = 0) const {
    return *caches_[group];
  }
  // Whether a lease holds recurrent-state slot `slot` (0 <= slot <
  // num_state_slots()).
  bool state_slot_held(int32_t slot) const { return slots_.held(slot); }

  // Checks the pool's, the cache's and the state slots' invariants
  // (O(num_blocks + num_state_slots)). The relation between refcounts (or
  // held slots) and leases is the caller's to check: the pager does not
  // track its leases.
  absl::Status CheckConsistency() const;

 private:
  friend class BlockLease;

  KvPager(int32_t num_blocks, int32_t block_size,
          std::vector<int32_t> windows, int32_t num_state_slots,
          BlockHashFn hash);

  int32_t BlocksFor(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + block_size() - 1) / block_size());
  }
  // The first block of `group` a position >= `computed` can still read.
  int32_t KeepFrom(int32_t group, int64_t computed) const {
    if (windows_[group] == 0) return 0;
    return static_cast<int32_t>(
        std::max<int64_t>(0, computed - windows_[group] + 1) / block_size());
  }
  // What admitting a valid prompt takes: its cache hits (every group's
  // ids in hits_[g], cursors in chains_[g]), the new blocks, and whether
  // the pool covers them. `salt` is null for a salt never interned (no
  // hits possible).
  struct Admission {
    int32_t hit_blocks = 0;
    int32_t new_blocks = 0;  // blocks taken from the free or cached ones
    bool needs_slot = false;  // a recurrent-state slot (see the top)
    // The hit's last block, whose state snapshot the lease starts from
    // (with state slots), else -1.
    int32_t snapshot_block = -1;
    bool fits = false;
  };
  // `state_hits`: with state slots, hits may end at a snapshot (else none).
  Admission PlanAdmission(absl::Span<const int32_t> prompt, const Salt* salt,
                          int32_t first_step, bool state_hits) const;
  // A place for a cached prefix's recurrent state: `slot` (-1: its slot
  // went to a sequence) holds the state after group-0 block `block` (-1:
  // empty) as registered with cache node `node`.
  struct StateSnapshot {
    int32_t slot = -1;
    int32_t block = -1;
    uint64_t node = 0;
    uint64_t used = 0;  // snapshot_tick_ when last kept or hit
  };
  // The valid snapshot of `block`: kept for the entry the block holds now.
  const StateSnapshot* SnapshotOf(int32_t block) const;
  // Free slots plus those snapshots hold (but `keep_block`'s): what a
  // sequence can take.
  int32_t AvailableStateSlots(int32_t keep_block = -1) const;
  // A free slot, else the least recently used snapshot's (but
  // `keep_block`'s). Precondition: AvailableStateSlots(keep_block) > 0.
  int32_t TakeStateSlot(int32_t keep_block = -1);
  absl::Status CheckSnapshots() const;
  // Hit blocks may be at most floor((len - 1) / B): the last token is
  // always computed.
  int32_t MaxHitBlocks(size_t prompt_tokens) const {
    return static_cast<int32_t>((prompt_tokens - 1) / block_size());
  }
  // Hit blocks of every group for `prompt` (the shortest group's).
  int32_t HitBlocks(absl::Span<const int32_t> prompt, const Salt& salt) const;
  absl::Status CheckLease(const BlockLease& lease) const;
  // Blocks Append of n tokens takes (with copies on write).
  int32_t AppendNeed(const BlockLease& lease, int32_t n) const;
  // Blocks windowed groups lack for positions up to `end`.
  int32_t CoverNeed(const BlockLease& lease, int32_t end) const;
  // Takes blocks for entries [end, last) of `group`, recording the lease's
  // known tokens in them.
  void TakeUpTo(BlockLease* lease, int32_t group, int32_t last);
  // A block for writing into `group`: free if any, else the LRU cached
  // block, evicted. Precondition: pool_.num_available() > 0.
  int32_t TakeBlock(int32_t group);
  // Called by BlockLease::Reset.
  void ReleaseLease(BlockLease* lease);

  BlockPool pool_;
  StateSlotPool slots_;  // empty for a model without recurrent state
  std::vector<StateSnapshot> snapshots_;  // EnableStateSnapshots' count
  absl::flat_hash_map<int32_t, int32_t> snapshot_index_;  // block -> place
  uint64_t snapshot_tick_ = 0;
  const std::vector<int32_t> windows_;  // (groups)
  bool windowed_ = false;               // some group has a window
  std::vector<std::unique_ptr<PrefixCache>> caches_;  // (groups)
  std::vector<int32_t> owner_;  // (num_blocks) the group a block serves
  PagerObserver* observer_ = nullptr;
  int64_t live_leases_ = 0;
  PagerStats counters_;  // the counter fields only
  // PlanAdmission's hits and cursors by group, reused.
  mutable std::vector<std::vector<int32_t>> hits_;
  mutable std::vector<ChainCursor> chains_;
};

}  // namespace paceline::kvpager

#endif  // PACELINE_KVPAGER_KV_PAGER_H_
