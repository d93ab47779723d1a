#include "engine/sampling/grammar/matcher.h"

#include <utility>

namespace paceline::engine::grammar {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), stacks_(InitialStacks(*grammar_)) {}

bool Matcher::AcceptByte(uint8_t byte) {
  if (!StepAll(*grammar_, stacks_, byte, &scratch_) || scratch_.empty()) {
    return false;
  }
  stacks_.swap(scratch_);
  return true;
}

bool Matcher::AcceptBytes(absl::string_view bytes) {
  std::vector<Stack> saved = stacks_;
  for (char c : bytes) {
    if (!AcceptByte(static_cast<uint8_t>(c))) {
      stacks_ = std::move(saved);
      return false;
    }
  }
  return true;
}

bool Matcher::IsComplete() const { return NextBytes().none(); }

bool Matcher::Allows(uint8_t byte, std::vector<Stack>* scratch) const {
  for (const Stack& s : stacks_) {
    scratch->clear();
    Step(*grammar_, s, byte, scratch);
    if (!scratch->empty()) return true;
  }
  return false;
}

std::bitset<256> Matcher::NextBytes() const {
  std::bitset<256> out;
  std::vector<Stack> next;
  for (int b = 0; b < 256; ++b) out[b] = Allows(static_cast<uint8_t>(b), &next);
  return out;
}

int Matcher::OnlyNextByte() const {
  int only = -1;
  std::vector<Stack> next;
  for (int b = 0; b < 256; ++b) {
    if (!Allows(static_cast<uint8_t>(b), &next)) continue;
    if (only >= 0) return -1;
    only = b;
  }
  return only;
}

}  // namespace paceline::engine::grammar
