#include "kvpager/block_lease.h"

#include <utility>

#include "kvpager/kv_pager.h"

namespace paceline::kvpager {

BlockLease::BlockLease(BlockLease&& other) noexcept
    : pager_(other.pager_),
      block_size_(other.block_size_),
      num_tokens_(other.num_tokens_),
      num_cached_tokens_(other.num_cached_tokens_),
      num_computed_tokens_(other.num_computed_tokens_),
      state_slot_(other.state_slot_),
      snapshot_slot_(other.snapshot_slot_),
      groups_(std::move(other.groups_)),
      salt_(other.salt_),
      extra_(std::move(other.extra_)) {
  other.Clear();
}

BlockLease& BlockLease::operator=(BlockLease&& other) noexcept {
  if (this != &other) {
    Reset();
    pager_ = other.pager_;
    block_size_ = other.block_size_;
    num_tokens_ = other.num_tokens_;
    num_cached_tokens_ = other.num_cached_tokens_;
    num_computed_tokens_ = other.num_computed_tokens_;
    state_slot_ = other.state_slot_;
    snapshot_slot_ = other.snapshot_slot_;
    salt_ = other.salt_;
    // Moved vectors keep their buffers, so the views stay valid.
    groups_ = std::move(other.groups_);
    extra_ = std::move(other.extra_);
    other.Clear();
  }
  return *this;
}

void BlockLease::Reset() {
  if (pager_ != nullptr) pager_->ReleaseLease(this);
  Clear();
}

int32_t BlockLease::num_blocks() const {
  int32_t n = 0;
  for (const Group& g : groups_) n += g.end - g.begin;
  return n;
}

void BlockLease::RefreshViews() {
  if (groups_.size() < 2) return;
  extra_->views.clear();
  for (const Group& g : groups_) extra_->views.emplace_back(g.blocks);
}

void BlockLease::Clear() {
  pager_ = nullptr;
  block_size_ = 0;
  num_tokens_ = 0;
  num_cached_tokens_ = 0;
  num_computed_tokens_ = 0;
  state_slot_ = -1;
  snapshot_slot_ = -1;
  salt_ = Salt{};
  groups_.clear();
  extra_.reset();
}

}  // namespace paceline::kvpager
