#include "kvpager/state_slot_pool.h"

#include <cassert>

#include "absl/strings/str_cat.h"

namespace paceline::kvpager {

StateSlotPool::StateSlotPool(int32_t num_slots)
    : held_(static_cast<size_t>(num_slots), false) {
  free_.reserve(static_cast<size_t>(num_slots));
  for (int32_t s = num_slots; s-- > 0;) free_.push_back(s);
}

int32_t StateSlotPool::Pop() {
  assert(!free_.empty());
  const int32_t slot = free_.back();
  free_.pop_back();
  held_[slot] = true;
  return slot;
}

void StateSlotPool::Release(int32_t slot) {
  assert(slot >= 0 && slot < num_slots() && held_[slot]);
  held_[slot] = false;
  free_.push_back(slot);
}

absl::Status StateSlotPool::CheckConsistency() const {
  std::vector<bool> seen(held_.size(), false);
  for (int32_t slot : free_) {
    if (slot < 0 || slot >= num_slots()) {
      return absl::InternalError(
          absl::StrCat("free state slot ", slot, " of ", num_slots()));
    }
    if (seen[slot] || held_[slot]) {
      return absl::InternalError(
          absl::StrCat("state slot ", slot,
                       seen[slot] ? " is free twice" : " is free and held"));
    }
    seen[slot] = true;
  }
  for (int32_t s = 0; s < num_slots(); ++s) {
    if (!seen[s] && !held_[s]) {
      return absl::InternalError(
          absl::StrCat("state slot ", s, " is neither free nor held"));
    }
  }
  return absl::OkStatus();
}

}  // namespace paceline::kvpager
