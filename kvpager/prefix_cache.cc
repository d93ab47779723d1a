#include "kvpager/prefix_cache.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paceline::kvpager {

PrefixCache::PrefixCache(BlockPool* pool, BlockHashFn hash)
    : pool_(pool), hash_(hash), entries_(pool->num_blocks()) {}

Salt PrefixCache::InternSalt(absl::string_view salt) {
  if (std::optional<Salt> found = FindSalt(salt)) return *found;
  const uint32_t id = static_cast<uint32_t>(salt_keys_.size());
  salt_ids_.emplace(std::string(salt), id);
  salt_keys_.push_back(HashSalt(salt));
  return Salt{id, salt_keys_.back()};
}

std::optional<Salt> PrefixCache::FindSalt(absl::string_view salt) const {
  auto it = salt_ids_.find(salt);
  if (it == salt_ids_.end()) return std::nullopt;
  return Salt{it->second, salt_keys_[it->second]};
}

int32_t PrefixCache::Find(const BlockKey& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? -1 : it->second;
}

bool PrefixCache::Verified(int32_t block, uint64_t parent_node,
                           uint32_t salt_id,
                           absl::Span<const int32_t> tokens) const {
  const Entry& e = entries_[block];
  return e.salt_id == salt_id && e.parent_node == parent_node &&
         pool_->tokens(block) == tokens;
}

ChainCursor PrefixCache::Match(absl::Span<const int32_t> tokens,
                               int32_t max_blocks, const Salt& salt,
                               std::vector<int32_t>* blocks) const {
  const int32_t bs = pool_->block_size();
  const int32_t limit =
      std::min<int64_t>(max_blocks, static_cast<int64_t>(tokens.size()) / bs);
  ChainCursor cursor;
  for (int32_t i = 0; i < limit; ++i) {
    const absl::Span<const int32_t> block_tokens =
        tokens.subspan(static_cast<size_t>(i) * bs, bs);
    const BlockKey key = hash_(cursor.key, salt.key, block_tokens);
    const int32_t block = Find(key);
    if (block < 0 || !Verified(block, cursor.node, salt.id, block_tokens)) {
      break;
    }
    if (blocks != nullptr) blocks->push_back(block);
    cursor = ChainCursor{i + 1, key, entries_[block].node};
  }
  return cursor;
}

ChainCursor PrefixCache::Register(int32_t block, const ChainCursor& parent,
                                  const Salt& salt) {
  ChainCursor broken{parent.num_blocks + 1, BlockKey{}, kBrokenNode};
  if (parent.node == kBrokenNode) return broken;
  if (parent.node != kRootNode) {
    // The parent entry must still exist, or no lookup can reach this block.
    const int32_t p = Find(parent.key);
    if (p < 0 || entries_[p].node != parent.node) return broken;
  }
  const absl::Span<const int32_t> tokens = pool_->tokens(block);
  const BlockKey key = hash_(parent.key, salt.key, tokens);
  if (pool_->registered(block)) {
    // Shared with the sequence that registered it (fork or hit): same
    // content chain, same key.
    assert(entries_[block].key == key);
    return ChainCursor{parent.num_blocks + 1, key, entries_[block].node};
  }
  const int32_t existing = Find(key);
  if (existing >= 0) {
    if (Verified(existing, parent.node, salt.id, tokens)) {
      const uint64_t node = entries_[existing].node;
      if (pool_->state(existing) == BlockState::kCached) {
        // Keep the live copy registered and free the idle duplicate.
        entries_[block] = entries_[existing];
        map_[key] = block;
        pool_->SetRegistered(block, true);
        pool_->SetRegistered(existing, false);
      }
      return ChainCursor{parent.num_blocks + 1, key, node};
    }
    Erase(existing);
  }
  const uint64_t node = next_node_++;
  entries_[block] = Entry{key, parent.key, node, parent.node, salt.id};
  map_.emplace(key, block);
  pool_->SetRegistered(block, true);
  return ChainCursor{parent.num_blocks + 1, key, node};
}

void PrefixCache::Erase(int32_t block) {
  assert(pool_->registered(block));
  map_.erase(entries_[block].key);
  pool_->SetRegistered(block, false);
}

void PrefixCache::Clear() {
  for (const auto& [key, block] : map_) pool_->SetRegistered(block, false);
  map_.clear();
}

absl::Status PrefixCache::CheckConsistency(bool pool_shared) const {
  int32_t registered = 0;
  for (int32_t b = 0; b < pool_->num_blocks(); ++b) {
    if (pool_->registered(b)) ++registered;
  }
  if (!pool_shared && registered != size()) {
    return absl::InternalError(absl::StrCat(
        registered, " blocks marked registered, map holds ", size()));
  }
  absl::flat_hash_set<uint64_t> nodes;
  for (const auto& [key, block] : map_) {
    if (block < 0 || block >= pool_->num_blocks() ||
        !pool_->registered(block)) {
      return absl::InternalError(
          absl::StrCat("map points at unregistered block ", block));
    }
    const Entry& e = entries_[block];
    if (!(e.key == key)) {
      return absl::InternalError(
          absl::StrCat("block ", block, " entry key differs from map key"));
    }
    if (e.salt_id >= salt_keys_.size() ||
        !(hash_(e.parent_key, salt_keys_[e.salt_id], pool_->tokens(block)) ==
          key)) {
      return absl::InternalError(absl::StrCat(
          "block ", block, ": key is not the hash of its content"));
    }
    if (e.node == kRootNode || e.node == kBrokenNode ||
        !nodes.insert(e.node).second) {
      return absl::InternalError(
          absl::StrCat("block ", block, ": bad or duplicate node ", e.node));
    }
  }
  return absl::OkStatus();
}

}  // namespace paceline::kvpager
