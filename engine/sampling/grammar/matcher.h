#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_MATCHER_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_MATCHER_H_

// Byte-level matching of a compiled grammar: where a text has got to in
// the grammar (pda.h's set of stacks), advanced byte by byte.
//
// Thread-compatible: one owner at a time; copies are independent (a fork
// copies the stacks; the compiled grammar is shared).

#include <bitset>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/pda.h"

namespace paceline::engine::grammar {

class Matcher {
 public:
  // At the start of the grammar's root rule.
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances past `bytes` when the grammar allows all of them (true);
  // otherwise returns false and leaves the matcher as it was. A text past
  // the limits of pda.h (too deep, too ambiguous) counts as refused.
  bool AcceptBytes(absl::string_view bytes);
  bool AcceptByte(uint8_t byte);

  // The grammar may end here.
  bool CanFinish() const { return AnyCanFinish(*grammar_, stacks_); }
  // Nothing more can follow (the text is complete).
  bool IsComplete() const;

  // The bytes that may come next.
  std::bitset<256> NextBytes() const;
  // The one byte that may come next, or -1 where none or several may.
  int OnlyNextByte() const;

  const std::vector<Stack>& stacks() const { return stacks_; }
  const CompiledGrammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const CompiledGrammar>& shared_grammar() const {
    return grammar_;
  }

 private:
  // Some stack can read `byte` (`scratch`: reused storage).
  bool Allows(uint8_t byte, std::vector<Stack>* scratch) const;

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<Stack> stacks_;
  std::vector<Stack> scratch_;
};

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_MATCHER_H_
