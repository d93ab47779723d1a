#include "engine/sampling/grammar/grammar_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/sampling/grammar/grammar_mask.h"

namespace paceline::engine::grammar {

GrammarCache::GrammarCache(std::shared_ptr<const TokenTrie> vocab,
                           GrammarCacheOptions options)
    : vocab_(std::move(vocab)),
      shared_(std::make_shared<SharedEntries>()),
      options_(std::move(options)) {}

absl::StatusOr<std::shared_ptr<MaskTables>> GrammarCache::Tables(
    const Constraint& c, absl::string_view tenant) {
  const std::string key = absl::StrCat(tenant, "\n", ConstraintKey(c));
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->tables;
    }
    ++misses_;
  }
  ASSIGN_OR_RETURN(Grammar grammar, ConstraintGrammar(c, options_.json));
  ASSIGN_OR_RETURN(std::shared_ptr<const CompiledGrammar> compiled,
                   Compile(grammar, options_.compile));
  auto tables =
      std::make_shared<MaskTables>(std::move(compiled), vocab_, shared_);
  absl::MutexLock lock(&mu_);
  auto found = index_.find(key);
  if (found != index_.end()) return found->second->tables;
  Entry e{key, std::string(tenant), tables,
          tables->grammar().memory_bytes() + tables->memory_bytes()};
  bytes_ += e.bytes;
  tenant_bytes_[e.tenant] += e.bytes;
  lru_.push_front(std::move(e));
  index_[key] = lru_.begin();
  EvictLocked();
  return tables;
}

absl::StatusOr<std::shared_ptr<const TokenMask>> GrammarCache::Mask(
    const Constraint& c, absl::string_view tenant) {
  ASSIGN_OR_RETURN(std::shared_ptr<MaskTables> tables, Tables(c, tenant));
  return std::make_shared<const GrammarMask>(std::move(tables));
}

void GrammarCache::DropLocked(Lru::iterator it) {
  bytes_ -= it->bytes;
  tenant_bytes_[it->tenant] -= it->bytes;
  index_.erase(it->key);
  lru_.erase(it);
}

void GrammarCache::EvictLocked() {
  // Refresh the sizes (mask tables grow as their states are visited).
  bytes_ = 0;
  tenant_bytes_.clear();
  for (Entry& e : lru_) {
    e.bytes = e.tables->grammar().memory_bytes() + e.tables->memory_bytes();
    bytes_ += e.bytes;
    tenant_bytes_[e.tenant] += e.bytes;
  }
  // A tenant over its budget loses its own oldest entries (never the
  // newest: the request that compiled it holds it anyway).
  auto it = lru_.end();
  while (it != lru_.begin()) {
    auto older = std::prev(it);
    if (older == lru_.begin()) break;
    if (tenant_bytes_[older->tenant] > options_.max_tenant_bytes) {
      DropLocked(older);  // `it` stays valid
    } else {
      it = older;
    }
  }
  while (bytes_ > options_.max_bytes && lru_.size() > 1) {
    DropLocked(std::prev(lru_.end()));
  }
}

GrammarCacheStats GrammarCache::stats() const {
  absl::MutexLock lock(&mu_);
  return {static_cast<int64_t>(lru_.size()), bytes_, hits_, misses_};
}

}  // namespace paceline::engine::grammar
