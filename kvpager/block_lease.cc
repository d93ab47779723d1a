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
      salt_(other.salt_),
      chain_(other.chain_),
      blocks_(std::move(other.blocks_)) {
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
    chain_ = other.chain_;
    blocks_ = std::move(other.blocks_);
    other.Clear();
  }
  return *this;
}

void BlockLease::Reset() {
  if (pager_ != nullptr) pager_->ReleaseLease(this);
  Clear();
}

void BlockLease::Clear() {
  pager_ = nullptr;
  block_size_ = 0;
  num_tokens_ = 0;
  num_cached_tokens_ = 0;
  num_computed_tokens_ = 0;
  salt_ = Salt{};
  chain_ = ChainCursor{};
  blocks_.clear();
}

}  // namespace paceline::kvpager
