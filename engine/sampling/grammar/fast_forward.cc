#include "engine/sampling/grammar/fast_forward.h"

namespace paceline::engine::grammar {
namespace {

// The child of `node` by `byte`, or -1.
int32_t Child(const TokenTrie& vocab, int32_t node, uint8_t byte) {
  const int32_t end = static_cast<int32_t>(vocab.end(node));
  for (int32_t c = node + 1; c < end; c = static_cast<int32_t>(vocab.end(c))) {
    if (vocab.byte(c) == byte) return c;
  }
  return -1;
}

}  // namespace

std::string ForcedBytes(const Matcher& matcher, size_t max_bytes) {
  std::string out;
  Matcher probe = matcher;
  while (out.size() < max_bytes && !probe.CanFinish()) {
    const int next = probe.OnlyNextByte();
    if (next < 0) break;
    probe.AcceptByte(static_cast<uint8_t>(next));
    out += static_cast<char>(next);
  }
  return out;
}

void SpellForced(const TokenTrie& vocab, absl::string_view bytes,
                 int32_t max_tokens, std::vector<int32_t>* out) {
  size_t pos = 0;
  for (int32_t n = 0; n < max_tokens && pos < bytes.size(); ++n) {
    // Down the trie along the rest of `bytes`: the deepest node that
    // spells a token, and whether the whole rest is a path.
    int32_t node = 0;
    int32_t token = -1;
    size_t length = 0;
    size_t depth = 0;
    while (pos + depth < bytes.size()) {
      node = Child(vocab, node, static_cast<uint8_t>(bytes[pos + depth]));
      if (node < 0) break;
      ++depth;
      if (!vocab.tokens(node).empty()) {
        token = vocab.tokens(node).front();
        length = depth;
      }
    }
    // The whole rest is a path with longer tokens below it: the model's
    // choice.
    if (node >= 0 && vocab.end(node) > static_cast<uint32_t>(node) + 1) return;
    if (token < 0) return;
    out->push_back(token);
    pos += length;
  }
}

}  // namespace paceline::engine::grammar
