#ifndef PACELINE_TESTS_TESTING_SCRIPTED_MASKS_H_
#define PACELINE_TESTS_TESTING_SCRIPTED_MASKS_H_

// Token masks scripted for tests of the sampling chain's mask link
// (engine/sampling/token_mask.h): simple enough that a test can check
// every generated token against the script without the mask's help.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/sampling/token_mask.h"

namespace paceline::testing {

// The k-th token a request generates (k from 0) must have the parity of
// k + first_parity. Stateful: a mask whose state is lost, reset or not
// advanced (a verified draft, a fork, a preempted request) lets a token of
// the wrong parity through. With `alternate` false, every token has parity
// first_parity (even ids only, for first_parity 0): drafts from the
// request's own history then stay valid.
class ParityMask final : public engine::TokenMask {
 public:
  explicit ParityMask(int32_t first_parity, bool alternate = true)
      : first_parity_(first_parity), alternate_(alternate) {}

  void Fill(absl::Span<uint32_t> allowed) override {
    const uint32_t bits = Parity() == 0 ? 0x55555555u : 0xaaaaaaaau;
    for (uint32_t& word : allowed) word = bits;
  }

  absl::Status Accept(int32_t token) override {
    if (token % 2 != Parity()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", token, " at position ", accepted_,
                       " is not of parity ", Parity()));
    }
    ++accepted_;
    return absl::OkStatus();
  }

  std::unique_ptr<engine::TokenMask> Clone() const override {
    return std::make_unique<ParityMask>(*this);
  }

  // The parity the k-th generated token must have.
  static int32_t ParityAt(int64_t k, int32_t first_parity, bool alternate) {
    return static_cast<int32_t>((first_parity + (alternate ? k : 0)) % 2);
  }

 private:
  int32_t Parity() const {
    return ParityAt(accepted_, first_parity_, alternate_);
  }

  int32_t first_parity_;
  bool alternate_;
  int64_t accepted_ = 0;
};

// The same words at every step; Accept refuses a token they do not allow.
class FixedMask final : public engine::TokenMask {
 public:
  explicit FixedMask(std::vector<uint32_t> words) : words_(std::move(words)) {}

  void Fill(absl::Span<uint32_t> allowed) override {
    std::copy(words_.begin(), words_.end(), allowed.begin());
  }
  absl::Status Accept(int32_t token) override {
    if (engine::MaskAllows(words_.data(), token)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("token ", token));
  }
  std::unique_ptr<engine::TokenMask> Clone() const override {
    return std::make_unique<FixedMask>(words_);
  }

 private:
  std::vector<uint32_t> words_;
};

// After each free token t, `run` forced tokens follow: the j-th (j from 1)
// is Forced(t, j), the only token allowed there, and ForcedTokens names
// the ones still to come. Free positions allow every token but the
// end-of-generation ids below 3 (stories260K's). So a run with fast-forward
// must generate exactly what it generates without: each forced position
// is a one-token mask either way.
class ForcingMask final : public engine::TokenMask {
 public:
  explicit ForcingMask(int32_t run, int32_t vocab_size)
      : run_(run), vocab_size_(vocab_size) {}

  static int32_t Forced(int32_t free_token, int32_t j, int32_t vocab_size) {
    return 3 + (free_token * 7 + j * 13) % (vocab_size - 3);
  }

  void Fill(absl::Span<uint32_t> allowed) override {
    if (next_ > 0) {
      for (uint32_t& word : allowed) word = 0;
      const int32_t id = Forced(free_, next_, vocab_size_);
      allowed[id >> 5] |= 1u << (id & 31);
      return;
    }
    for (uint32_t& word : allowed) word = ~0u;
    allowed[0] &= ~7u;
  }
  absl::Status Accept(int32_t token) override {
    if (next_ > 0) {
      if (token != Forced(free_, next_, vocab_size_)) {
        return absl::InvalidArgumentError(
            absl::StrCat("token ", token, " is not the forced one"));
      }
      next_ = next_ == run_ ? 0 : next_ + 1;
      return absl::OkStatus();
    }
    if (token < 3) return absl::InvalidArgumentError("end of generation");
    free_ = token;
    next_ = run_ > 0 ? 1 : 0;
    return absl::OkStatus();
  }
  std::unique_ptr<engine::TokenMask> Clone() const override {
    return std::make_unique<ForcingMask>(*this);
  }
  void ForcedTokens(int32_t max, std::vector<int32_t>* out) const override {
    for (int32_t j = next_; j > 0 && j <= run_ && max > 0; ++j, --max) {
      out->push_back(Forced(free_, j, vocab_size_));
    }
  }

 private:
  int32_t run_;
  int32_t vocab_size_;
  int32_t free_ = 0;  // the last free token
  int32_t next_ = 0;  // the forced position to come, 1..run; 0: free
};

// No three tokens in a row twice, the prompt's included (and no
// end-of-generation id below 3). An n-gram draft continues an earlier
// occurrence of the last two or more tokens with what followed them
// there, so its first token always repeats a trigram: refused.
class NoRepeatTrigramMask final : public engine::TokenMask {
 public:
  explicit NoRepeatTrigramMask(std::vector<int32_t> prompt)
      : history_(std::move(prompt)) {}

  void Fill(absl::Span<uint32_t> allowed) override {
    for (uint32_t& word : allowed) word = ~0u;
    allowed[0] &= ~7u;
    for (int32_t id : Refused()) allowed[id >> 5] &= ~(1u << (id & 31));
  }
  absl::Status Accept(int32_t token) override {
    const std::vector<int32_t> refused = Refused();
    if (token < 3 ||
        std::find(refused.begin(), refused.end(), token) != refused.end()) {
      return absl::InvalidArgumentError(absl::StrCat("token ", token));
    }
    history_.push_back(token);
    return absl::OkStatus();
  }
  std::unique_ptr<engine::TokenMask> Clone() const override {
    return std::make_unique<NoRepeatTrigramMask>(*this);
  }

 private:
  // The tokens that would repeat a trigram next.
  std::vector<int32_t> Refused() const {
    std::vector<int32_t> out;
    const size_t n = history_.size();
    for (size_t i = 2; n >= 2 && i < n; ++i) {
      if (history_[i - 2] == history_[n - 2] &&
          history_[i - 1] == history_[n - 1]) {
        out.push_back(history_[i]);
      }
    }
    return out;
  }

  std::vector<int32_t> history_;
};

// Allows nothing: a request under it fails its first step.
class NothingMask final : public engine::TokenMask {
 public:
  void Fill(absl::Span<uint32_t> allowed) override {
    for (uint32_t& word : allowed) word = 0;
  }
  absl::Status Accept(int32_t token) override {
    return absl::InvalidArgumentError(absl::StrCat("token ", token));
  }
  std::unique_ptr<engine::TokenMask> Clone() const override {
    return std::make_unique<NothingMask>();
  }
};

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_SCRIPTED_MASKS_H_
