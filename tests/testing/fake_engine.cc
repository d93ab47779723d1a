#include "tests/testing/fake_engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace paceline::testing {

int32_t LetterScript(absl::Span<const int32_t> context) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int32_t t : context) {
    h ^= static_cast<uint64_t>(t) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return 'a' + static_cast<int32_t>(h % 26);
}

FakeEngine::FakeEngine(FakeEngineOptions options)
    : options_(std::move(options)),
      slots_(static_cast<size_t>(options_.num_blocks) * options_.block_size,
             -1) {
  config_.architecture = "fake";
  config_.name = "fake";
  config_.n_vocab = options_.n_vocab;
  config_.context_length = options_.context_length;
}

absl::Status FakeEngine::Check(const engine::ForwardBatch& batch,
                               absl::Span<float> logits) const {
  const int64_t n = batch.num_tokens();
  if (n > options_.max_tokens_per_step) {
    return absl::InvalidArgumentError(
        absl::StrCat("step of ", n, " tokens, limit ",
                     options_.max_tokens_per_step));
  }
  if (logits.size() !=
      static_cast<size_t>(engine::NumLogitRows(batch)) * options_.n_vocab) {
    return absl::InvalidArgumentError("logits size");
  }
  std::vector<bool> covered(n, false);
  for (const engine::SequenceSlice& s : batch.sequences) {
    if (s.token_count < 1 || s.token_begin < 0 ||
        s.token_begin + s.token_count > n || s.position_begin < 0) {
      return absl::InvalidArgumentError("slice out of range");
    }
    for (int32_t i = s.token_begin; i < s.token_begin + s.token_count; ++i) {
      if (covered[i]) return absl::InvalidArgumentError("token covered twice");
      covered[i] = true;
    }
    const int64_t end = int64_t{s.position_begin} + s.token_count;
    if (static_cast<int64_t>(s.block_table.size()) * options_.block_size <
        end) {
      return absl::InvalidArgumentError("block table too short");
    }
    for (int32_t b : s.block_table) {
      if (b < 0 || b >= options_.num_blocks) {
        return absl::InvalidArgumentError(absl::StrCat("block id ", b));
      }
    }
  }
  if (std::find(covered.begin(), covered.end(), false) != covered.end()) {
    return absl::InvalidArgumentError("a token is in no slice");
  }
  return absl::OkStatus();
}

absl::Status FakeEngine::Forward(const engine::ForwardBatch& batch,
                                 absl::Span<float> logits) {
  ++num_forward_calls_;
  if (!fail_next_.ok()) return std::exchange(fail_next_, absl::OkStatus());
  if (absl::Status s = Check(batch, logits); !s.ok()) return s;
  const int32_t bs = options_.block_size;
  auto slot = [&](const engine::SequenceSlice& s, int32_t p) -> int32_t& {
    return slots_[static_cast<size_t>(s.block_table[p / bs]) * bs + p % bs];
  };
  for (const engine::SequenceSlice& s : batch.sequences) {
    for (int32_t i = 0; i < s.token_count; ++i) {
      slot(s, s.position_begin + i) = batch.tokens[s.token_begin + i];
    }
  }
  int64_t row = 0;
  for (const engine::SequenceSlice& s : batch.sequences) {
    const int32_t last = s.position_begin + s.token_count;
    for (int32_t end = last - s.num_logits + 1; end <= last; ++end, ++row) {
      context_.resize(end);
      for (int32_t p = 0; p < end; ++p) context_[p] = slot(s, p);
      const int32_t next = options_.script(context_);
      float* out = logits.data() + row * options_.n_vocab;
      std::fill(out, out + options_.n_vocab, 0.0f);
      if (next >= 0 && next < options_.n_vocab) out[next] = 1.0f;
    }
  }
  if (options_.record) {
    RecordedStep step;
    step.tokens = batch.tokens;
    step.copies = std::move(pending_copies_);
    for (const engine::SequenceSlice& s : batch.sequences) {
      RecordedSlice r;
      r.token_begin = s.token_begin;
      r.token_count = s.token_count;
      r.position_begin = s.position_begin;
      r.num_logits = s.num_logits;
      r.block_table.assign(s.block_table.begin(), s.block_table.end());
      r.first_token = slot(s, 0);
      step.slices.push_back(std::move(r));
    }
    steps_.push_back(std::move(step));
  }
  pending_copies_.clear();
  return absl::OkStatus();
}

absl::Status FakeEngine::CopyBlocks(
    absl::Span<const kvpager::BlockCopy> copies) {
  for (const kvpager::BlockCopy& c : copies) {
    if (c.src < 0 || c.src >= options_.num_blocks || c.dst < 0 ||
        c.dst >= options_.num_blocks) {
      return absl::InvalidArgumentError("copy block id out of range");
    }
  }
  const int32_t bs = options_.block_size;
  for (const kvpager::BlockCopy& c : copies) {
    std::copy_n(slots_.begin() + static_cast<size_t>(c.src) * bs, bs,
                slots_.begin() + static_cast<size_t>(c.dst) * bs);
    if (options_.record) pending_copies_.push_back(c);
  }
  return absl::OkStatus();
}

}  // namespace paceline::testing
