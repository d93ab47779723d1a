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
