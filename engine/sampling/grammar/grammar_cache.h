#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_GRAMMAR_CACHE_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_GRAMMAR_CACHE_H_

// Compiled constraints of one model, cached: a request's constraint
// (constraint.h) becomes the token-mask prototype its sampler clones.
//
// Schemas and grammars come from clients, so compiling is bounded (the
// front ends' limits, CompileLimits' state count and time budget) and so is
// the cache: entries are per tenant (one tenant's grammars never serve
// another, as with the prefix cache) and least recently used ones go first,
// past a tenant's byte budget or past the whole cache's. An entry's bytes
// are its automata's plus its mask tables' (which grow as states are
// visited; measured again when the cache decides).
//
// Thread-safe: compiles run outside the lock (two requests may compile the
// same constraint at once; the first stored wins).

#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/constraint.h"
#include "engine/sampling/grammar/json_schema.h"
#include "engine/sampling/grammar/mask_tables.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/sampling/token_mask.h"

namespace paceline::engine::grammar {

struct GrammarCacheOptions {
  int64_t max_bytes = int64_t{512} << 20;
  int64_t max_tenant_bytes = int64_t{128} << 20;
  CompileLimits compile;
  JsonSchemaOptions json;
};

struct GrammarCacheStats {
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t hits = 0;
  int64_t misses = 0;  // compiles, failed ones included
};

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenTrie> vocab,
               GrammarCacheOptions options = {});

  // The mask prototype for `c`, compiled for `tenant` or found in its
  // entries. Errors are the compile's: InvalidArgument / Unimplemented from
  // the front ends, ResourceExhausted / DeadlineExceeded past the limits.
  absl::StatusOr<std::shared_ptr<const TokenMask>> Mask(
      const Constraint& c, absl::string_view tenant);

  // The tables behind a constraint, for tools (paceline grammar).
  absl::StatusOr<std::shared_ptr<MaskTables>> Tables(const Constraint& c,
                                                     absl::string_view tenant);

  GrammarCacheStats stats() const;
  const TokenTrie& vocab() const { return *vocab_; }
  const std::shared_ptr<const TokenTrie>& vocab_shared() const {
    return vocab_;
  }

 private:
  struct Entry {
    std::string key;
    std::string tenant;
    std::shared_ptr<MaskTables> tables;
    int64_t bytes = 0;
  };
  using Lru = std::list<Entry>;

  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLocked(Lru::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<const TokenTrie> vocab_;
  const std::shared_ptr<SharedEntries> shared_;
  const GrammarCacheOptions options_;

  mutable absl::Mutex mu_;
  Lru lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  absl::flat_hash_map<std::string, Lru::iterator> index_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> tenant_bytes_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_GRAMMAR_CACHE_H_
