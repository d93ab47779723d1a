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
      groups_(std::move(other.groups_)),
      salt_(other.salt_),
      views_(std::move(other.views_)),
      tokens_(std::move(other.tokens_)) {
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
    salt_ = other.salt_;
    // Moved vectors keep their buffers, so the views stay valid.
    groups_ = std::move(other.groups_);
    views_ = std::move(other.views_);
    tokens_ = std::move(other.tokens_);
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
  views_.clear();
  if (groups_.size() < 2) return;
  for (const Group& g : groups_) views_.emplace_back(g.blocks);
}

void BlockLease::Clear() {
  pager_ = nullptr;
  block_size_ = 0;
  num_tokens_ = 0;
  num_cached_tokens_ = 0;
  num_computed_tokens_ = 0;
  salt_ = Salt{};
  groups_.clear();
  views_.clear();
  tokens_.clear();
}

}  // namespace paceline::kvpager
