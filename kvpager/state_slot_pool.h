#ifndef PACELINE_KVPAGER_STATE_SLOT_POOL_H_
#define PACELINE_KVPAGER_STATE_SLOT_POOL_H_

// The recurrent-state slots of a hybrid model (engine/engine.h,
// Engine::num_state_slots): N slots, ids 0 .. N - 1, each either free or
// held by one lease (a sequence's state, or its snapshot while it
// speculates). Slots are never shared: a fork gets a slot of its own and a
// copy (kv_pager.h). The pool knows nothing about what a slot holds.
//
// O(1) operations: the free list is a stack that hands out 0, 1, 2, ...
// first. Thread-safety: none; owned by a KvPager, used from its thread.
// Preconditions on ids are programming errors, checked by assert.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace paceline::kvpager {

class StateSlotPool {
 public:
  // num_slots >= 0 (0: a model without recurrent state).
  explicit StateSlotPool(int32_t num_slots);

  StateSlotPool(const StateSlotPool&) = delete;
  StateSlotPool& operator=(const StateSlotPool&) = delete;

  int32_t num_slots() const { return static_cast<int32_t>(held_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_held() const { return num_slots() - num_free(); }
  bool held(int32_t slot) const { return held_[slot]; }

  // A free slot, now held. Precondition: num_free() > 0.
  int32_t Pop();
  // Gives a held slot back. Precondition: held(slot).
  void Release(int32_t slot);

  // Every slot free or held, never both; the free list's ids distinct.
  absl::Status CheckConsistency() const;

 private:
  std::vector<int32_t> free_;  // stack of free slot ids
  std::vector<bool> held_;     // (num_slots)
};

}  // namespace paceline::kvpager

#endif  // PACELINE_KVPAGER_STATE_SLOT_POOL_H_
