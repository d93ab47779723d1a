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
  return std::unique_ptr<KvPager>(new KvPager(num_blocks, block_size, hash));
}

KvPager::KvPager(int32_t num_blocks, int32_t block_size, BlockHashFn hash)
    : pool_(num_blocks, block_size), cache_(&pool_, hash) {
  counters_.block_size = block_size;
}

KvPager::~KvPager() {
  // A lease outliving its pager would release into freed memory.
  assert(live_leases_ == 0);
}

KvPager::Admission KvPager::PlanAdmission(absl::Span<const int32_t> prompt,
                                          const Salt* salt,
                                          std::vector<int32_t>* hits) const {
  Admission admission;
  int32_t hit_blocks = 0;
  int32_t hits_cached = 0;  // hits now on the LRU list: not available twice
  if (salt != nullptr) {
    std::vector<int32_t>* out = hits;
    if (out == nullptr) {
      out = &scratch_;
      out->clear();
    }
    const size_t first = out->size();
    admission.chain =
        cache_.Match(prompt, MaxHitBlocks(prompt.size()), *salt, out);
    hit_blocks = admission.chain.num_blocks;
    for (size_t i = first; i < out->size(); ++i) {
      if (pool_.state((*out)[i]) == BlockState::kCached) ++hits_cached;
    }
  }
  admission.new_blocks = BlocksFor(prompt.size()) - hit_blocks;
  admission.fits = admission.new_blocks <= pool_.num_available() - hits_cached;
  return admission;
}

int32_t KvPager::CachedPrefixTokens(absl::Span<const int32_t> prompt,
                                    absl::string_view salt) const {
  const std::optional<Salt> s = cache_.FindSalt(salt);
  if (prompt.empty() || !s.has_value()) return 0;
  return cache_.Match(prompt, MaxHitBlocks(prompt.size()), *s, nullptr)
             .num_blocks *
         block_size();
}

bool KvPager::CanAllocate(absl::Span<const int32_t> prompt,
                          absl::string_view salt) const {
  if (prompt.empty() || prompt.size() > size_t{kMaxSequenceTokens}) {
    return false;
  }
  const std::optional<Salt> s = cache_.FindSalt(salt);
  return PlanAdmission(prompt, s.has_value() ? &*s : nullptr, nullptr).fits;
}

absl::StatusOr<BlockLease> KvPager::Allocate(absl::Span<const int32_t> prompt,
                                             absl::string_view salt) {
  if (prompt.empty()) {
    return absl::InvalidArgumentError("cannot allocate an empty prompt");
  }
  if (prompt.size() > size_t{kMaxSequenceTokens}) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt of ", prompt.size(), " tokens exceeds ", kMaxSequenceTokens));
  }
  const Salt s = cache_.InternSalt(salt);
  BlockLease lease;
  lease.blocks_.reserve(BlocksFor(prompt.size()));
  const Admission admission = PlanAdmission(prompt, &s, &lease.blocks_);
  if (!admission.fits) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "prompt of ", prompt.size(), " tokens needs ", admission.new_blocks,
        " new KV blocks; ", pool_.num_available(), " available"));
  }
  // References on the hits first, so that taking new blocks cannot evict
  // them.
  for (int32_t block : lease.blocks_) pool_.AddRef(block);
  const int32_t bs = block_size();
  for (int32_t i = admission.chain.num_blocks; i < BlocksFor(prompt.size());
       ++i) {
    const int32_t block = TakeBlock();
    const size_t begin = static_cast<size_t>(i) * bs;
    const size_t n = std::min(prompt.size() - begin, static_cast<size_t>(bs));
    std::copy_n(prompt.begin() + begin, n, pool_.tokens(block).begin());
    lease.blocks_.push_back(block);
  }
  lease.pager_ = this;
  lease.block_size_ = bs;
  lease.num_tokens_ = static_cast<int32_t>(prompt.size());
  lease.num_cached_tokens_ = admission.chain.num_blocks * bs;
  lease.num_computed_tokens_ = lease.num_cached_tokens_;
  lease.salt_ = s;
  lease.chain_ = admission.chain;
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

bool KvPager::CanAppend(const BlockLease& lease, int32_t num_new_tokens) const {
  if (!CheckLease(lease).ok() || num_new_tokens < 0 ||
      num_new_tokens > kMaxSequenceTokens - lease.num_tokens_) {
    return false;
  }
  if (num_new_tokens == 0) return true;
  int32_t needed = BlocksFor(int64_t{lease.num_tokens_} + num_new_tokens) -
                   lease.num_blocks();
  if (lease.num_tokens_ % block_size() != 0 &&
      pool_.ref_count(lease.blocks_.back()) > 1) {
    ++needed;  // copy-on-write of the shared partial last block
  }
  return needed <= pool_.num_available();
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
  int32_t offset = lease->num_tokens_ % bs;
  if (offset != 0 && pool_.ref_count(lease->blocks_.back()) > 1) {
    const int32_t src = lease->blocks_.back();
    const int32_t dst = TakeBlock();
    std::copy_n(pool_.tokens(src).begin(), offset, pool_.tokens(dst).begin());
    pool_.Release(src);  // still held by the other sharers
    lease->blocks_.back() = dst;
    copies->push_back(BlockCopy{src, dst});
    ++counters_.cow_copies;
    if (observer_ != nullptr) observer_->OnCopyOnWrite();
  }
  for (int32_t token : tokens) {
    if (offset == 0) lease->blocks_.push_back(TakeBlock());  // last is full
    pool_.tokens(lease->blocks_.back())[offset] = token;
    ++lease->num_tokens_;
    offset = offset + 1 == bs ? 0 : offset + 1;
  }
  return absl::OkStatus();
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
  const size_t keep = static_cast<size_t>(BlocksFor(num_tokens));
  while (lease->blocks_.size() > keep) {
    pool_.Release(lease->blocks_.back());
    lease->blocks_.pop_back();
  }
  lease->num_tokens_ = num_tokens;
  return absl::OkStatus();
}

absl::Status KvPager::MarkComputed(BlockLease* lease,
                                   int32_t num_computed_tokens) {
  RETURN_IF_ERROR(CheckLease(*lease));
  if (num_computed_tokens < 0 || num_computed_tokens > lease->num_tokens_) {
    return absl::InvalidArgumentError(
        absl::StrCat("computed tokens ", num_computed_tokens, " outside [0, ",
                     lease->num_tokens_, "]"));
  }
  lease->num_computed_tokens_ =
      std::max(lease->num_computed_tokens_, num_computed_tokens);
  const int32_t full_blocks = num_computed_tokens / block_size();
  while (lease->chain_.num_blocks < full_blocks) {
    lease->chain_ = cache_.Register(lease->blocks_[lease->chain_.num_blocks],
                                    lease->chain_, lease->salt_);
  }
  return absl::OkStatus();
}

absl::StatusOr<BlockLease> KvPager::Fork(const BlockLease& lease) {
  RETURN_IF_ERROR(CheckLease(lease));
  BlockLease fork;
  fork.blocks_ = lease.blocks_;
  for (int32_t block : fork.blocks_) pool_.AddRef(block);
  fork.pager_ = this;
  fork.block_size_ = lease.block_size_;
  fork.num_tokens_ = lease.num_tokens_;
  fork.num_cached_tokens_ = lease.num_cached_tokens_;
  fork.num_computed_tokens_ = lease.num_computed_tokens_;
  fork.salt_ = lease.salt_;
  fork.chain_ = lease.chain_;
  ++live_leases_;
  return fork;
}

int32_t KvPager::TakeBlock() {
  if (pool_.num_free() > 0) return pool_.PopFree();
  const int32_t block = pool_.PopLeastRecentlyUsed();
  cache_.Erase(block);
  ++counters_.evictions;
  if (observer_ != nullptr) observer_->OnEviction(1);
  return block;
}

void KvPager::ReleaseLease(BlockLease* lease) {
  for (auto it = lease->blocks_.rbegin(); it != lease->blocks_.rend(); ++it) {
    pool_.Release(*it);
  }
  lease->blocks_.clear();
  --live_leases_;
}

int32_t KvPager::EvictCached(int32_t max_blocks) {
  int32_t evicted = 0;
  while (evicted < max_blocks && pool_.num_cached() > 0) {
    const int32_t block = pool_.PopLeastRecentlyUsed();
    cache_.Erase(block);
    pool_.Release(block);  // unregistered now: back to the free list
    ++evicted;
  }
  counters_.evictions += evicted;
  if (evicted > 0 && observer_ != nullptr) observer_->OnEviction(evicted);
  return evicted;
}

void KvPager::ResetPrefixCache() { cache_.Clear(); }

PagerStats KvPager::Stats() const {
  PagerStats stats = counters_;
  stats.total_blocks = pool_.num_blocks();
  stats.free_blocks = pool_.num_free();
  stats.used_blocks = pool_.num_used();
  stats.cached_blocks = pool_.num_cached();
  return stats;
}

absl::Status KvPager::CheckConsistency() const {
  RETURN_IF_ERROR(pool_.CheckConsistency());
  return cache_.CheckConsistency();
}

}  // namespace paceline::kvpager
