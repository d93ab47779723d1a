#include "kvpager/block_pool.h"

#include <cassert>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paceline::kvpager {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      meta_(static_cast<size_t>(num_blocks) + 1),
      tokens_(static_cast<size_t>(num_blocks) * block_size, 0) {
  assert(num_blocks >= 1 && block_size >= 1);
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  Meta& sentinel = meta_[num_blocks_];
  sentinel.prev = num_blocks_;
  sentinel.next = num_blocks_;
}

int32_t BlockPool::PopFree() {
  assert(!free_.empty());
  const int32_t block = free_.back();
  free_.pop_back();
  Meta& m = meta_[block];
  assert(m.state == BlockState::kFree && m.ref == 0 && !m.registered);
  m.state = BlockState::kUsed;
  m.ref = 1;
  return block;
}

int32_t BlockPool::PopLeastRecentlyUsed() {
  assert(num_cached_ > 0);
  const int32_t block = meta_[num_blocks_].next;
  UnlinkLru(block);
  Meta& m = meta_[block];
  m.state = BlockState::kUsed;
  m.ref = 1;
  --num_cached_;
  return block;
}

void BlockPool::AddRef(int32_t block) {
  Meta& m = meta_[block];
  assert(m.state != BlockState::kFree);
  if (m.state == BlockState::kCached) {
    UnlinkLru(block);
    m.state = BlockState::kUsed;
    --num_cached_;
  }
  ++m.ref;
}

void BlockPool::Release(int32_t block) {
  Meta& m = meta_[block];
  assert(m.state == BlockState::kUsed && m.ref > 0);
  if (--m.ref > 0) return;
  if (m.registered) {
    m.state = BlockState::kCached;
    LinkLruTail(block);
    ++num_cached_;
  } else {
    m.state = BlockState::kFree;
    free_.push_back(block);
  }
}

void BlockPool::Touch(int32_t block) {
  assert(meta_[block].state == BlockState::kCached);
  UnlinkLru(block);
  LinkLruTail(block);
}

void BlockPool::SetRegistered(int32_t block, bool registered) {
  Meta& m = meta_[block];
  assert(m.state != BlockState::kFree);
  m.registered = registered;
  if (!registered && m.state == BlockState::kCached) {
    UnlinkLru(block);
    --num_cached_;
    m.state = BlockState::kFree;
    free_.push_back(block);
  }
}

std::vector<int32_t> BlockPool::CachedInLruOrder() const {
  std::vector<int32_t> order;
  order.reserve(num_cached_);
  for (int32_t b = meta_[num_blocks_].next; b != num_blocks_;
       b = meta_[b].next) {
    order.push_back(b);
  }
  return order;
}

void BlockPool::LinkLruTail(int32_t block) {
  Meta& sentinel = meta_[num_blocks_];
  const int32_t tail = sentinel.prev;
  meta_[block].prev = tail;
  meta_[block].next = num_blocks_;
  meta_[tail].next = block;
  sentinel.prev = block;
}

void BlockPool::UnlinkLru(int32_t block) {
  Meta& m = meta_[block];
  meta_[m.prev].next = m.next;
  meta_[m.next].prev = m.prev;
  m.prev = -1;
  m.next = -1;
}

absl::Status BlockPool::CheckConsistency() const {
  int32_t counts[3] = {0, 0, 0};
  for (int32_t b = 0; b < num_blocks_; ++b) {
    const Meta& m = meta_[b];
    ++counts[static_cast<int>(m.state)];
    const bool ok =
        (m.state == BlockState::kFree && m.ref == 0 && !m.registered) ||
        (m.state == BlockState::kUsed && m.ref > 0) ||
        (m.state == BlockState::kCached && m.ref == 0 && m.registered);
    if (!ok) {
      return absl::InternalError(
          absl::StrCat("block ", b, ": state ", static_cast<int>(m.state),
                       " with ref ", m.ref, " registered ", m.registered));
    }
  }
  if (counts[0] != num_free() || counts[2] != num_cached_) {
    return absl::InternalError(absl::StrCat(
        "counts: ", counts[0], " free blocks vs free list ", num_free(), ", ",
        counts[2], " cached blocks vs counter ", num_cached_));
  }
  std::vector<bool> seen(num_blocks_, false);
  for (int32_t b : free_) {
    if (b < 0 || b >= num_blocks_ || meta_[b].state != BlockState::kFree ||
        seen[b]) {
      return absl::InternalError(absl::StrCat("free list holds block ", b));
    }
    seen[b] = true;
  }
  int32_t walked = 0;
  for (int32_t prev = num_blocks_, b = meta_[num_blocks_].next;
       b != num_blocks_; prev = b, b = meta_[b].next) {
    if (b < 0 || b >= num_blocks_ || meta_[b].state != BlockState::kCached ||
        meta_[b].prev != prev || ++walked > num_cached_) {
      return absl::InternalError(absl::StrCat("LRU list broken at block ", b));
    }
  }
  if (walked != num_cached_) {
    return absl::InternalError(absl::StrCat("LRU list holds ", walked,
                                            " blocks, counter ", num_cached_));
  }
  return absl::OkStatus();
}

}  // namespace paceline::kvpager
