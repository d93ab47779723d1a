#include "kvpager/kv_pager.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace paceline::kvpager {

absl::StatusOr<std::unique_ptr<KvPager>> KvPager::Create(int32_t num_blocks,
                                                         int32_t block_size,
                                                         BlockHashFn hash) {
  return Create(num_blocks, block_size, {0}, 0, hash);
}

absl::StatusOr<std::unique_ptr<KvPager>> KvPager::Create(
    int32_t num_blocks, int32_t block_size, std::vector<int32_t> group_windows,
    int32_t num_state_slots, BlockHashFn hash) {
  if (num_blocks < 1 || block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV pager needs at least one block of at least one "
                     "token; got ",
                     num_blocks, " blocks of ", block_size, " tokens"));
  }
  if (int64_t{num_blocks} * block_size > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(num_blocks, " blocks of ", block_size,
                     " tokens exceed 2^31 - 1 KV slots"));
  }
  if (hash == nullptr) return absl::InvalidArgumentError("null block hash");
  if (num_state_slots < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV pager: ", num_state_slots, " recurrent-state slots"));
  }
  if (group_windows.empty()) {
    return absl::InvalidArgumentError("KV pager needs at least one group");
  }
  for (int32_t w : group_windows) {
    if (w < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV group window ", w, " is negative"));
    }
  }
  return std::unique_ptr<KvPager>(new KvPager(num_blocks, block_size,
                                              std::move(group_windows),
                                              num_state_slots, hash));
}

int64_t KvPager::GroupBlocksToHold(int32_t window, int32_t block_size,
                                   int64_t positions, int32_t step_tokens) {
  const int64_t all = (positions + block_size - 1) / block_size;
  if (window <= 0) return all;
  // Positions [c - window + 1, c + step): window - 1 + step of them, over
  // at most one block more than they fill when unaligned.
  const int64_t span = int64_t{window} - 1 + std::max(step_tokens, 1);
  return std::min(all, (span + block_size - 1) / block_size + 1);
}

int64_t KvPager::BlocksToHold(int64_t positions, int32_t step_tokens) const {
  int64_t blocks = 0;
  for (int32_t w : windows_) {
    blocks += GroupBlocksToHold(w, block_size(), positions, step_tokens);
  }
  return blocks;
}

KvPager::KvPager(int32_t num_blocks, int32_t block_size,
                 std::vector<int32_t> windows, int32_t num_state_slots,
                 BlockHashFn hash)
    : pool_(num_blocks, block_size),
      slots_(num_state_slots),
      windows_(std::move(windows)),
      owner_(static_cast<size_t>(num_blocks), 0),
      hits_(windows_.size()),
      chains_(windows_.size()) {
  counters_.block_size = block_size;
  for (int32_t w : windows_) {
    windowed_ = windowed_ || w > 0;
    caches_.push_back(std::make_unique<PrefixCache>(&pool_, hash));
  }
}

KvPager::~KvPager() {
  // A lease outliving its pager would release into freed memory.
  assert(live_leases_ == 0);
}

int32_t KvPager::HitBlocks(absl::Span<const int32_t> prompt,
                           const Salt& salt) const {
  int32_t k = MaxHitBlocks(prompt.size());
  for (const auto& cache : caches_) {
    if (k == 0) break;
    k = cache->Match(prompt, k, salt, nullptr).num_blocks;
  }
  return k;
}

KvPager::Admission KvPager::PlanAdmission(absl::Span<const int32_t> prompt,
                                          const Salt* salt, int32_t first_step,
                                          bool state_hits) const {
  Admission admission;
  // Each group's longest chain, then every group cut to the shortest.
  // With state slots a hit also needs the recurrent state at its end: it
  // is cut to the last block with a snapshot (see the top), and there is
  // none without snapshots or a list to copy them into.
  const bool state = num_state_slots() > 0;
  int32_t k = salt != nullptr && (!state || state_hits)
                  ? MaxHitBlocks(prompt.size())
                  : 0;
  for (size_t g = 0; g < caches_.size(); ++g) {
    hits_[g].clear();
    chains_[g] = ChainCursor{};
    if (k > 0) chains_[g] = caches_[g]->Match(prompt, k, *salt, &hits_[g]);
    k = std::min(k, chains_[g].num_blocks);
  }
  if (state) {
    while (k > 0 && SnapshotOf(hits_[0][k - 1]) == nullptr) --k;
    if (k > 0) admission.snapshot_block = hits_[0][k - 1];
  }
  for (size_t g = 0; g < caches_.size(); ++g) {
    if (chains_[g].num_blocks == k) continue;
    hits_[g].clear();
    chains_[g] = caches_[g]->Match(prompt, k, *salt, &hits_[g]);
  }
  admission.hit_blocks = k;
  const int64_t len = static_cast<int64_t>(prompt.size());
  const int32_t all = BlocksFor(len);
  const int32_t first =
      BlocksFor(std::min(len, int64_t{k} * block_size() + first_step));
  int32_t hits_cached = 0;  // kept hits now on the LRU list: not available
  for (int32_t g = 0; g < num_groups(); ++g) {
    for (int32_t i = KeepFrom(g, int64_t{k} * block_size()); i < k; ++i) {
      if (pool_.state(hits_[g][i]) == BlockState::kCached) ++hits_cached;
    }
    admission.new_blocks += (windows_[g] > 0 ? first : all) - k;
  }
  admission.fits = admission.new_blocks <= pool_.num_available() - hits_cached;
  admission.needs_slot = num_state_slots() > 0;
  if (admission.needs_slot &&
      AvailableStateSlots(admission.snapshot_block) == 0) {
    admission.fits = false;
  }
  return admission;
}

int32_t KvPager::CachedPrefixTokens(absl::Span<const int32_t> prompt,
                                    absl::string_view salt) const {
  const std::optional<Salt> s = caches_[0]->FindSalt(salt);
  if (prompt.empty() || !s.has_value()) return 0;
  if (num_state_slots() == 0) return HitBlocks(prompt, *s) * block_size();
  return PlanAdmission(prompt, &*s, kMaxSequenceTokens, /*state_hits=*/true)
             .hit_blocks *
         block_size();
}

bool KvPager::CanAllocate(absl::Span<const int32_t> prompt,
                          absl::string_view salt, int32_t first_step) const {
  if (prompt.empty() || prompt.size() > size_t{kMaxSequenceTokens}) {
    return false;
  }
  const std::optional<Salt> s = caches_[0]->FindSalt(salt);
  return PlanAdmission(prompt, s.has_value() ? &*s : nullptr, first_step,
                       /*state_hits=*/true)
      .fits;
}

absl::StatusOr<BlockLease> KvPager::Allocate(
    absl::Span<const int32_t> prompt, absl::string_view salt,
    int32_t first_step, std::vector<StateCopy>* state_copies) {
  if (prompt.empty()) {
    return absl::InvalidArgumentError("cannot allocate an empty prompt");
  }
  if (prompt.size() > size_t{kMaxSequenceTokens}) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt of ", prompt.size(), " tokens exceeds ", kMaxSequenceTokens));
  }
  // Every group's cache interns the same salts in the same order: one id.
  const Salt s = caches_[0]->InternSalt(salt);
  for (size_t g = 1; g < caches_.size(); ++g) caches_[g]->InternSalt(salt);
  const Admission admission =
      PlanAdmission(prompt, &s, first_step, state_copies != nullptr);
  if (!admission.fits) {
    if (admission.needs_slot &&
        AvailableStateSlots(admission.snapshot_block) == 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no free recurrent-state slot (", num_state_slots(),
                       ", all held)"));
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "prompt of ", prompt.size(), " tokens needs ", admission.new_blocks,
        " new KV blocks; ", pool_.num_available(), " available"));
  }
  const int32_t k = admission.hit_blocks;
  const int32_t bs = block_size();
  const int64_t len = static_cast<int64_t>(prompt.size());
  BlockLease lease;
  lease.pager_ = this;
  lease.block_size_ = bs;
  lease.num_tokens_ = static_cast<int32_t>(len);
  lease.num_cached_tokens_ = k * bs;
  lease.num_computed_tokens_ = lease.num_cached_tokens_;
  lease.salt_ = s;
  if (admission.needs_slot) {
    lease.state_slot_ = TakeStateSlot(admission.snapshot_block);
  }
  if (admission.snapshot_block >= 0) {
    // The cached prefix's recurrent state becomes the sequence's (hits
    // end where a snapshot is: PlanAdmission).
    StateSnapshot& snap =
        snapshots_[snapshot_index_.at(admission.snapshot_block)];
    snap.used = ++snapshot_tick_;
    state_copies->push_back(StateCopy{snap.slot, lease.state_slot_});
    ++counters_.state_copies;
    ++counters_.state_snapshot_hits;
  }
  if (windowed_ || num_groups() > 1) {
    lease.extra_ = std::make_unique<BlockLease::Extra>();
  }
  if (windowed_) lease.extra_->tokens.assign(prompt.begin(), prompt.end());
  lease.groups_.resize(windows_.size());
  // References on the kept hits first, so that taking new blocks cannot
  // evict them.
  for (int32_t g = 0; g < num_groups(); ++g) {
    BlockLease::Group& group = lease.groups_[g];
    group.blocks.assign(BlocksFor(len), kNoBlock);
    group.begin = KeepFrom(g, int64_t{k} * bs);
    for (int32_t i = group.begin; i < k; ++i) {
      group.blocks[i] = hits_[g][i];
      pool_.AddRef(group.blocks[i]);
    }
    group.end = std::max(group.begin, k);
    group.chain = chains_[g];
    // The hits before the window are not held, but the next hit on this
    // prefix needs them (its chain starts at the first block): keep them
    // as recent as the prefix's use, the first block last to go.
    for (int32_t i = group.begin; i-- > 0;) {
      if (pool_.state(hits_[g][i]) == BlockState::kCached) {
        pool_.Touch(hits_[g][i]);
      }
    }
  }
  const int32_t first = BlocksFor(std::min(len, int64_t{k} * bs + first_step));
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int32_t last = windows_[g] > 0 ? first : BlocksFor(len);
    for (int32_t i = lease.groups_[g].end; i < last; ++i) {
      const int32_t block = TakeBlock(g);
      const size_t begin = static_cast<size_t>(i) * bs;
      const size_t n = std::min(prompt.size() - begin, static_cast<size_t>(bs));
      std::copy_n(prompt.begin() + begin, n, pool_.tokens(block).begin());
      lease.groups_[g].blocks[i] = block;
    }
    lease.groups_[g].end = std::max(lease.groups_[g].end, last);
  }
  lease.RefreshViews();
  ++live_leases_;

  ++counters_.prefix_queries;
  counters_.prefix_query_tokens += lease.num_tokens_;
  counters_.prefix_hit_tokens += lease.num_cached_tokens_;
  if (observer_ != nullptr) {
    observer_->OnPrefixQuery(lease.num_tokens_, lease.num_cached_tokens_);
  }
  return lease;
}

absl::Status KvPager::CheckLease(const BlockLease& lease) const {
  if (lease.empty()) return absl::InvalidArgumentError("empty lease");
  if (lease.pager_ != this) {
    return absl::InvalidArgumentError("lease belongs to another pager");
  }
  return absl::OkStatus();
}

int32_t KvPager::AppendNeed(const BlockLease& lease, int32_t n) const {
  const int32_t last = BlocksFor(int64_t{lease.num_tokens_} + n);
  const bool partial = lease.num_tokens_ % block_size() != 0;
  if (!windowed_ && lease.groups_.size() == 1) {  // the common case, inline
    const std::vector<int32_t>& blocks = lease.groups_.front().blocks;
    return last - static_cast<int32_t>(blocks.size()) +
           (partial && pool_.ref_count(blocks.back()) > 1 ? 1 : 0);
  }
  int32_t needed = 0;
  for (const BlockLease::Group& g : lease.groups_) {
    needed += last - g.end;
    const int32_t size = static_cast<int32_t>(g.blocks.size());
    if (partial && g.end == size && pool_.ref_count(g.blocks.back()) > 1) {
      ++needed;  // copy-on-write of the shared partial last block
    }
  }
  return needed;
}

bool KvPager::CanAppend(const BlockLease& lease, int32_t num_new_tokens) const {
  if (!CheckLease(lease).ok() || num_new_tokens < 0 ||
      num_new_tokens > kMaxSequenceTokens - lease.num_tokens_) {
    return false;
  }
  if (num_new_tokens == 0) return true;
  return AppendNeed(lease, num_new_tokens) <= pool_.num_available();
}

void KvPager::TakeUpTo(BlockLease* lease, int32_t group, int32_t last) {
  BlockLease::Group& g = lease->groups_[group];
  const int32_t bs = block_size();
  for (; g.end < last; ++g.end) {
    const int32_t block = TakeBlock(group);
    const size_t begin = static_cast<size_t>(g.end) * bs;
    const std::vector<int32_t>& known = lease->extra_->tokens;
    if (begin < known.size()) {
      const size_t n = std::min(known.size() - begin, size_t(bs));
      std::copy_n(known.begin() + begin, n,
                  pool_.tokens(block).begin());
    }
    g.blocks[g.end] = block;
  }
}

absl::Status KvPager::Append(BlockLease* lease,
                             absl::Span<const int32_t> tokens,
                             std::vector<BlockCopy>* copies) {
  RETURN_IF_ERROR(CheckLease(*lease));
  if (copies == nullptr) {
    return absl::InvalidArgumentError("Append needs a copy list");
  }
  if (tokens.size() >
      static_cast<size_t>(kMaxSequenceTokens - lease->num_tokens_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("appending ", tokens.size(), " tokens to ",
                     lease->num_tokens_, " exceeds ", kMaxSequenceTokens));
  }
  if (tokens.empty()) return absl::OkStatus();
  const int32_t n = static_cast<int32_t>(tokens.size());
  if (!CanAppend(*lease, n)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("appending ", n, " tokens to a sequence of ",
                     lease->num_tokens_, " needs more than the ",
                     pool_.num_available(), " available KV blocks"));
  }
  const int32_t bs = block_size();
  const int32_t offset = lease->num_tokens_ % bs;
  for (BlockLease::Group& g : lease->groups_) {
    const int32_t size = static_cast<int32_t>(g.blocks.size());
    if (offset == 0 || g.end != size || pool_.ref_count(g.blocks.back()) < 2) {
      continue;
    }
    const int32_t src = g.blocks.back();
    const int32_t dst = TakeBlock(owner_[src]);
    std::copy_n(pool_.tokens(src).begin(), offset, pool_.tokens(dst).begin());
    pool_.Release(src);  // still held by the other sharers
    g.blocks.back() = dst;
    copies->push_back(BlockCopy{src, dst});
    ++counters_.cow_copies;
    if (observer_ != nullptr) observer_->OnCopyOnWrite();
  }
  if (windowed_) {
    std::vector<int32_t>& known = lease->extra_->tokens;
    known.insert(known.end(), tokens.begin(), tokens.end());
  }
  int32_t group = 0;
  for (BlockLease::Group& g : lease->groups_) {
    // A windowed group first takes the uncomputed positions' blocks it
    // lacks (their tokens from the lease's record).
    const int32_t size = static_cast<int32_t>(g.blocks.size());
    if (g.end < size) TakeUpTo(lease, group, size);
    int32_t slot = offset;
    for (int32_t token : tokens) {
      if (slot == 0) {  // the last block is full
        g.blocks.push_back(TakeBlock(group));
        ++g.end;
      }
      pool_.tokens(g.blocks.back())[slot] = token;
      slot = slot + 1 == bs ? 0 : slot + 1;
    }
    ++group;
  }
  lease->num_tokens_ += n;
  if (num_groups() > 1) lease->RefreshViews();
  return absl::OkStatus();
}

int32_t KvPager::CoverNeed(const BlockLease& lease, int32_t end) const {
  const int32_t last = BlocksFor(end);
  int32_t needed = 0;
  for (const BlockLease::Group& g : lease.groups_) {
    needed += std::max(0, last - g.end);
  }
  return needed;
}

bool KvPager::CanCover(const BlockLease& lease, int32_t end) const {
  if (!CheckLease(lease).ok() || end > lease.num_tokens_) return false;
  return CoverNeed(lease, end) <= pool_.num_available();
}

absl::Status KvPager::Cover(BlockLease* lease, int32_t end) {
  RETURN_IF_ERROR(CheckLease(*lease));
  if (end > lease->num_tokens_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "covering ", end, " positions of a sequence of ", lease->num_tokens_));
  }
  if (!CanCover(*lease, end)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("covering ", end, " positions needs ",
                     CoverNeed(*lease, end), " KV blocks; ",
                     pool_.num_available(), " available"));
  }
  const int32_t last = BlocksFor(end);
  bool taken = false;
  for (int32_t group = 0; group < num_groups(); ++group) {
    taken = taken || lease->groups_[group].end < last;
    TakeUpTo(lease, group, last);
  }
  if (taken) lease->RefreshViews();
  return absl::OkStatus();
}

int32_t KvPager::AppendRoom(const BlockLease& lease, int64_t new_blocks) const {
  const int32_t bs = block_size();
  int64_t lag = 0;  // windowed entries not taken yet
  for (const BlockLease::Group& g : lease.groups_) {
    lag += static_cast<int64_t>(g.blocks.size()) - g.end;
  }
  if (lag > new_blocks) return 0;
  const int64_t own = (bs - lease.num_tokens_ % bs) % bs;
  const int64_t room = own + (new_blocks - lag) / num_groups() * bs;
  return static_cast<int32_t>(
      std::min<int64_t>(room, kMaxSequenceTokens - lease.num_tokens_));
}

absl::Status KvPager::Truncate(BlockLease* lease, int32_t num_tokens) {
  RETURN_IF_ERROR(CheckLease(*lease));
  if (num_tokens < lease->num_computed_tokens_ ||
      num_tokens > lease->num_tokens_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "truncating to ", num_tokens, " tokens: outside [",
        lease->num_computed_tokens_, ", ", lease->num_tokens_, "]"));
  }
  // The dropped blocks hold no computed full block, so none is in the
  // cache: they go back to the free list (or stay with a sharer).
  const int32_t keep = BlocksFor(num_tokens);
  for (BlockLease::Group& g : lease->groups_) {
    while (static_cast<int32_t>(g.blocks.size()) > keep) {
      if (g.blocks.back() != kNoBlock) pool_.Release(g.blocks.back());
      g.blocks.pop_back();
    }
    g.end = std::min(g.end, keep);
  }
  lease->num_tokens_ = num_tokens;
  if (windowed_) lease->extra_->tokens.resize(num_tokens);
  lease->RefreshViews();
  return absl::OkStatus();
}

absl::Status KvPager::MarkComputed(BlockLease* lease,
                                   int32_t num_computed_tokens, bool cache) {
  RETURN_IF_ERROR(CheckLease(*lease));
  if (num_computed_tokens < 0 || num_computed_tokens > lease->num_tokens_) {
    return absl::InvalidArgumentError(
        absl::StrCat("computed tokens ", num_computed_tokens, " outside [0, ",
                     lease->num_tokens_, "]"));
  }
  lease->num_computed_tokens_ =
      std::max(lease->num_computed_tokens_, num_computed_tokens);
  const int32_t full_blocks = num_computed_tokens / block_size();
  // With state slots, but without snapshots, the prefix cache is off
  // (see the top).
  if (num_state_slots() > 0 && snapshots_.empty()) cache = false;
  for (int32_t group = 0; cache && group < num_groups(); ++group) {
    BlockLease::Group& g = lease->groups_[group];
    if (g.chain.num_blocks >= full_blocks) continue;
    while (g.chain.num_blocks < full_blocks) {
      const int32_t block = g.blocks[g.chain.num_blocks];
      // A block given back unregistered breaks the chain (never for the
      // scheduler: blocks are registered before they leave the window).
      g.chain = block == kNoBlock
                    ? ChainCursor{g.chain.num_blocks + 1, BlockKey{},
                                  kBrokenNode}
                    : caches_[group]->Register(block, g.chain, lease->salt_);
    }
  }
  if (!windowed_) return absl::OkStatus();
  // Windowed groups give back what no later position reads, oldest first.
  bool released = false;
  for (int32_t group = 0; group < num_groups(); ++group) {
    BlockLease::Group& g = lease->groups_[group];
    const int32_t keep = KeepFrom(group, lease->num_computed_tokens_);
    for (; g.begin < keep; ++g.begin) {
      if (g.begin >= g.end) continue;
      pool_.Release(g.blocks[g.begin]);
      g.blocks[g.begin] = kNoBlock;
      released = true;
    }
    g.end = std::max(g.end, g.begin);
  }
  if (released) lease->RefreshViews();
  return absl::OkStatus();
}

bool KvPager::CanFork(const BlockLease& lease) const {
  return CheckLease(lease).ok() &&
         (num_state_slots() == 0 || AvailableStateSlots() > 0);
}

absl::StatusOr<BlockLease> KvPager::Fork(
    const BlockLease& lease, std::vector<StateCopy>* state_copies) {
  RETURN_IF_ERROR(CheckLease(lease));
  if (num_state_slots() > 0) {
    if (state_copies == nullptr) {
      return absl::InvalidArgumentError(
          "Fork with recurrent-state slots needs a state copy list");
    }
    if (AvailableStateSlots() == 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "no free recurrent-state slot for the fork (", num_state_slots(),
          ", all held)"));
    }
  }
  BlockLease fork;
  fork.groups_ = lease.groups_;
  for (const BlockLease::Group& g : fork.groups_) {
    for (int32_t i = g.begin; i < g.end; ++i) pool_.AddRef(g.blocks[i]);
  }
  fork.pager_ = this;
  fork.block_size_ = lease.block_size_;
  fork.num_tokens_ = lease.num_tokens_;
  fork.num_cached_tokens_ = lease.num_cached_tokens_;
  fork.num_computed_tokens_ = lease.num_computed_tokens_;
  fork.salt_ = lease.salt_;
  if (num_state_slots() > 0) {
    fork.state_slot_ = TakeStateSlot();
    state_copies->push_back(StateCopy{lease.state_slot_, fork.state_slot_});
    ++counters_.state_copies;
  }
  if (lease.extra_ != nullptr) {
    fork.extra_ = std::make_unique<BlockLease::Extra>(*lease.extra_);
  }
  fork.RefreshViews();
  ++live_leases_;
  return fork;
}

bool KvPager::CanSnapshot(const BlockLease& lease) const {
  return CheckLease(lease).ok() && lease.state_slot_ >= 0 &&
         lease.snapshot_slot_ < 0 && AvailableStateSlots() > 0;
}

absl::Status KvPager::Snapshot(BlockLease* lease,
                               std::vector<StateCopy>* state_copies) {
  RETURN_IF_ERROR(CheckLease(*lease));
  if (lease->state_slot_ < 0) {
    return absl::InvalidArgumentError(
        "snapshot of a lease without a recurrent-state slot");
  }
  if (lease->snapshot_slot_ >= 0) {
    return absl::InvalidArgumentError("the lease has a snapshot already");
  }
  if (state_copies == nullptr) {
    return absl::InvalidArgumentError("Snapshot needs a state copy list");
  }
  if (AvailableStateSlots() == 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no free recurrent-state slot for a snapshot (",
                     num_state_slots(), ", all held)"));
  }
  lease->snapshot_slot_ = TakeStateSlot();
  state_copies->push_back(StateCopy{lease->state_slot_, lease->snapshot_slot_});
  ++counters_.state_copies;
  return absl::OkStatus();
}

absl::Status KvPager::RestoreSnapshot(BlockLease* lease) {
  RETURN_IF_ERROR(CheckLease(*lease));
  if (lease->snapshot_slot_ < 0) {
    return absl::InvalidArgumentError("the lease has no snapshot");
  }
  slots_.Release(lease->state_slot_);
  lease->state_slot_ = std::exchange(lease->snapshot_slot_, -1);
  return absl::OkStatus();
}

absl::Status KvPager::DropSnapshot(BlockLease* lease) {
  RETURN_IF_ERROR(CheckLease(*lease));
  if (lease->snapshot_slot_ < 0) {
    return absl::InvalidArgumentError("the lease has no snapshot");
  }
  slots_.Release(std::exchange(lease->snapshot_slot_, -1));
  return absl::OkStatus();
}

absl::Status KvPager::EnableStateSnapshots(int32_t count) {
  if (count < 0 || count > num_state_slots()) {
    return absl::InvalidArgumentError(absl::StrCat(
        count, " state snapshots; want 0 to the ", num_state_slots(),
        " state slots"));
  }
  if (!snapshots_.empty() || live_leases_ > 0) {
    return absl::FailedPreconditionError(
        "state snapshots are enabled once, before any lease");
  }
  snapshots_.resize(static_cast<size_t>(count));
  return absl::OkStatus();
}

const KvPager::StateSnapshot* KvPager::SnapshotOf(int32_t block) const {
  const auto it = snapshot_index_.find(block);
  if (it == snapshot_index_.end()) return nullptr;
  const StateSnapshot& snap = snapshots_[it->second];
  // Valid while the block still holds the entry it was kept for.
  if (owner_[block] != 0 || !pool_.registered(block) ||
      caches_[0]->entry(block).node != snap.node) {
    return nullptr;
  }
  return &snap;
}

int32_t KvPager::AvailableStateSlots(int32_t keep_block) const {
  int32_t evictable = 0;
  for (const StateSnapshot& snap : snapshots_) {
    if (snap.slot >= 0 && snap.block != keep_block) ++evictable;
  }
  return slots_.num_free() + evictable;
}

int32_t KvPager::TakeStateSlot(int32_t keep_block) {
  if (slots_.num_free() > 0) return slots_.Pop();
  // Snapshots are a cache: a sequence's slot comes first. The least
  // recently used one (but `keep_block`'s) gives its slot up.
  StateSnapshot* lru = nullptr;
  for (StateSnapshot& snap : snapshots_) {
    if (snap.slot < 0 || snap.block == keep_block) continue;
    if (lru == nullptr || snap.used < lru->used) lru = &snap;
  }
  assert(lru != nullptr);  // the callers checked AvailableStateSlots
  snapshot_index_.erase(lru->block);
  lru->block = -1;
  ++counters_.state_snapshot_evictions;
  return std::exchange(lru->slot, -1);
}

int32_t KvPager::KeepStateSnapshot(const BlockLease& lease, int32_t end,
                                   int32_t replace,
                                   std::vector<StateCopy>* state_copies) {
  const int32_t bs = block_size();
  if (snapshots_.empty() || state_copies == nullptr ||
      !CheckLease(lease).ok() || lease.state_slot_ < 0 || end < bs ||
      end % bs != 0 || end > lease.num_computed_tokens_) {
    return -1;
  }
  const int32_t index = end / bs - 1;
  const BlockLease::Group& g0 = lease.groups_[0];
  // The block must be registered as the lease's own chain's (MarkComputed
  // registered it): then a hit on it matches exactly the lease's tokens.
  if (index >= static_cast<int32_t>(g0.blocks.size()) ||
      g0.chain.num_blocks <= index || g0.chain.node == kBrokenNode) {
    return -1;
  }
  const int32_t block = g0.blocks[index];
  if (block == kNoBlock || owner_[block] != 0 || !pool_.registered(block)) {
    return -1;
  }
  const uint64_t node = caches_[0]->entry(block).node;
  if (const auto it = snapshot_index_.find(block);
      it != snapshot_index_.end() && snapshots_[it->second].node == node) {
    snapshots_[it->second].used = ++snapshot_tick_;  // kept already
    return block;
  }
  // Into the replaced snapshot, an empty place, or the least recently used.
  StateSnapshot* target = nullptr;
  if (const auto it = snapshot_index_.find(replace);
      replace >= 0 && it != snapshot_index_.end()) {
    target = &snapshots_[it->second];
  }
  for (StateSnapshot& snap : snapshots_) {
    if (target != nullptr) break;
    if (snap.block < 0) target = &snap;
  }
  if (target == nullptr) {
    target = &snapshots_[0];
    for (StateSnapshot& snap : snapshots_) {
      if (snap.used < target->used) target = &snap;
    }
  }
  if (target->slot < 0) {
    if (slots_.num_free() == 0) return -1;  // every slot runs a sequence
    target->slot = slots_.Pop();
  }
  if (target->block >= 0) {
    snapshot_index_.erase(target->block);
    ++counters_.state_snapshot_evictions;
  }
  target->block = block;
  target->node = node;
  target->used = ++snapshot_tick_;
  snapshot_index_[block] = static_cast<int32_t>(target - snapshots_.data());
  state_copies->push_back(StateCopy{lease.state_slot_, target->slot});
  ++counters_.state_copies;
  return block;
}

absl::Status KvPager::CheckSnapshots() const {
  int32_t indexed = 0;
  for (size_t i = 0; i < snapshots_.size(); ++i) {
    const StateSnapshot& snap = snapshots_[i];
    if (snap.slot >= 0 && !slots_.held(snap.slot)) {
      return absl::InternalError(absl::StrCat(
          "state snapshot ", i, "'s slot ", snap.slot, " is free"));
    }
    if (snap.block < 0) continue;
    ++indexed;
    const auto it = snapshot_index_.find(snap.block);
    if (snap.slot < 0 || it == snapshot_index_.end() ||
        it->second != static_cast<int32_t>(i)) {
      return absl::InternalError(absl::StrCat(
          "state snapshot ", i, " of block ", snap.block, " is not indexed"));
    }
  }
  if (indexed != static_cast<int32_t>(snapshot_index_.size())) {
    return absl::InternalError("the state snapshot index has stale entries");
  }
  return absl::OkStatus();
}

int32_t KvPager::TakeBlock(int32_t group) {
  int32_t block;
  if (pool_.num_free() > 0) {
    block = pool_.PopFree();
  } else {
    block = pool_.PopLeastRecentlyUsed();
    caches_[owner_[block]]->Erase(block);
    ++counters_.evictions;
    if (observer_ != nullptr) observer_->OnEviction(1);
  }
  owner_[block] = group;
  return block;
}

void KvPager::ReleaseLease(BlockLease* lease) {
  for (BlockLease::Group& g : lease->groups_) {
    for (int32_t i = g.end; i-- > g.begin;) pool_.Release(g.blocks[i]);
    g.blocks.clear();
  }
  if (lease->snapshot_slot_ >= 0) slots_.Release(lease->snapshot_slot_);
  if (lease->state_slot_ >= 0) slots_.Release(lease->state_slot_);
  --live_leases_;
}

int32_t KvPager::EvictCached(int32_t max_blocks) {
  int32_t evicted = 0;
  while (evicted < max_blocks && pool_.num_cached() > 0) {
    const int32_t block = pool_.PopLeastRecentlyUsed();
    caches_[owner_[block]]->Erase(block);
    pool_.Release(block);  // unregistered now: back to the free list
    ++evicted;
  }
  counters_.evictions += evicted;
  if (evicted > 0 && observer_ != nullptr) observer_->OnEviction(evicted);
  return evicted;
}

void KvPager::ResetPrefixCache() {
  for (const auto& cache : caches_) cache->Clear();
}

PagerStats KvPager::Stats() const {
  PagerStats stats = counters_;
  stats.total_blocks = pool_.num_blocks();
  stats.free_blocks = pool_.num_free();
  stats.used_blocks = pool_.num_used();
  stats.cached_blocks = pool_.num_cached();
  stats.total_state_slots = slots_.num_slots();
  stats.free_state_slots = slots_.num_free();
  for (const StateSnapshot& snap : snapshots_) {
    if (snap.block >= 0) ++stats.state_snapshots;
  }
  return stats;
}

absl::Status KvPager::CheckConsistency() const {
  RETURN_IF_ERROR(pool_.CheckConsistency());
  RETURN_IF_ERROR(slots_.CheckConsistency());
  RETURN_IF_ERROR(CheckSnapshots());
  if (num_state_slots() > 0 && snapshots_.empty()) {
    // The prefix cache is off with slots without snapshots (see the top).
    for (const auto& cache : caches_) {
      if (cache->size() > 0) {
        return absl::InternalError(absl::StrCat(
            "a pager with state slots holds ", cache->size(),
            " prefix-cache entries"));
      }
    }
  }
  if (caches_.size() == 1) return caches_[0]->CheckConsistency();
  int32_t entries = 0;
  for (const auto& cache : caches_) {
    RETURN_IF_ERROR(cache->CheckConsistency(/*pool_shared=*/true));
    entries += cache->size();
  }
  int32_t registered = 0;
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
    if (pool_.registered(b)) ++registered;
  }
  if (registered != entries) {
    return absl::InternalError(absl::StrCat(
        registered, " blocks marked registered, the groups' caches hold ",
        entries));
  }
  return absl::OkStatus();
}

}  // namespace paceline::kvpager
