// Recurrent-state slots (kv_pager.h, "Recurrent-state slots"): one slot per
// lease from Allocate to reset, admission refused without a free slot,
// forks with a slot of their own and a state copy, snapshots for
// speculation, the prefix cache off, and stats and consistency over slots.

#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kvpager/block_lease.h"
#include "kvpager/block_table.h"
#include "kvpager/kv_pager.h"
#include "kvpager/pager_stats.h"
#include "tests/testing/pager.h"

namespace paceline::kvpager {
namespace {

using ::paceline::testing::Range;

constexpr int32_t kB = 4;

std::unique_ptr<KvPager> SlotPager(int32_t num_blocks, int32_t slots,
                                   std::vector<int32_t> windows = {0}) {
  absl::StatusOr<std::unique_ptr<KvPager>> pager =
      KvPager::Create(num_blocks, kB, std::move(windows), slots);
  EXPECT_TRUE(pager.ok()) << pager.status();
  return pager.ok() ? *std::move(pager) : nullptr;
}

void ExpectSlots(const KvPager& pager, int64_t free) {
  const PagerStats s = pager.Stats();
  EXPECT_EQ(s.total_state_slots, pager.num_state_slots());
  EXPECT_EQ(s.free_state_slots, free);
  EXPECT_EQ(pager.num_free_state_slots(), free);
  EXPECT_TRUE(pager.CheckConsistency().ok()) << pager.CheckConsistency();
}

BlockLease Allocated(KvPager& pager, int32_t first, int32_t n) {
  absl::StatusOr<BlockLease> lease = pager.Allocate(Range(first, n), "t");
  EXPECT_TRUE(lease.ok()) << lease.status();
  return lease.ok() ? *std::move(lease) : BlockLease();
}

TEST(StateSlotsTest, CreateCountsSlots) {
  EXPECT_EQ(KvPager::Create(8, kB, {0}, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto none = SlotPager(8, 0);
  EXPECT_EQ(none->num_state_slots(), 0);
  ExpectSlots(*none, 0);
  auto pager = SlotPager(8, 3);
  EXPECT_EQ(pager->num_state_slots(), 3);
  ExpectSlots(*pager, 3);
}

TEST(StateSlotsTest, WithoutSlotsLeasesHaveNone) {
  auto pager = SlotPager(8, 0);
  BlockLease lease = Allocated(*pager, 0, 5);
  EXPECT_EQ(lease.state_slot(), -1);
  EXPECT_EQ(lease.snapshot_slot(), -1);
  EXPECT_TRUE(pager->CanFork(lease));
  absl::StatusOr<BlockLease> fork = pager->Fork(lease);  // no copy list
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_EQ(fork->state_slot(), -1);
  EXPECT_FALSE(pager->CanSnapshot(lease));
  std::vector<StateCopy> copies;
  EXPECT_EQ(pager->Snapshot(&lease, &copies).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(pager->Stats().state_copies, 0);
}

TEST(StateSlotsTest, EachLeaseHoldsASlotUntilReset) {
  auto pager = SlotPager(16, 2);
  BlockLease a = Allocated(*pager, 0, 5);
  BlockLease b = Allocated(*pager, 100, 3);
  EXPECT_EQ(a.state_slot(), 0);
  EXPECT_EQ(b.state_slot(), 1);
  ExpectSlots(*pager, 0);

  // Blocks are plentiful, slots are not: admission is refused, and the
  // refusal changes nothing.
  const PagerStats before = pager->Stats();
  EXPECT_FALSE(pager->CanAllocate(Range(200, 2), "t"));
  absl::StatusOr<BlockLease> refused = pager->Allocate(Range(200, 2), "t");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pager->Stats().free_blocks, before.free_blocks);
  EXPECT_EQ(pager->Stats().used_blocks, before.used_blocks);
  ExpectSlots(*pager, 0);

  // A moved lease keeps its slot; destroying or resetting one frees it.
  BlockLease moved = std::move(a);
  EXPECT_EQ(moved.state_slot(), 0);
  EXPECT_EQ(a.state_slot(), -1);  // NOLINT(bugprone-use-after-move)
  ExpectSlots(*pager, 0);
  moved.Reset();
  EXPECT_EQ(moved.state_slot(), -1);
  ExpectSlots(*pager, 1);
  EXPECT_TRUE(pager->CanAllocate(Range(200, 2), "t"));
  {
    BlockLease c = Allocated(*pager, 200, 2);
    EXPECT_EQ(c.state_slot(), 0);
    ExpectSlots(*pager, 0);
  }
  ExpectSlots(*pager, 1);
  pager->Free(std::move(b));
  ExpectSlots(*pager, 2);
  EXPECT_EQ(pager->Stats().used_blocks, 0);
}

TEST(StateSlotsTest, AppendAndTruncateKeepTheSlot) {
  auto pager = SlotPager(16, 1);
  BlockLease lease = Allocated(*pager, 0, 5);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(pager->Append(&lease, Range(5, 6), &copies).ok());
  ASSERT_TRUE(pager->MarkComputed(&lease, 5).ok());
  ASSERT_TRUE(pager->Truncate(&lease, 7).ok());
  EXPECT_EQ(lease.state_slot(), 0);
  ExpectSlots(*pager, 0);
}

TEST(StateSlotsTest, ForkTakesASlotAndReportsACopy) {
  auto pager = SlotPager(16, 3);
  BlockLease parent = Allocated(*pager, 0, 6);
  ASSERT_TRUE(pager->MarkComputed(&parent, 6).ok());
  std::vector<StateCopy> copies;
  EXPECT_EQ(pager->Fork(parent).status().code(),
            absl::StatusCode::kInvalidArgument);  // no copy list
  ExpectSlots(*pager, 2);

  ASSERT_TRUE(pager->CanFork(parent));
  absl::StatusOr<BlockLease> a = pager->Fork(parent, &copies);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<BlockLease> b = pager->Fork(parent, &copies);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->state_slot(), 1);
  EXPECT_EQ(b->state_slot(), 2);
  EXPECT_EQ(copies, (std::vector<StateCopy>{{0, 1}, {0, 2}}));
  EXPECT_EQ(pager->Stats().state_copies, 2);
  EXPECT_EQ(a->num_computed_tokens(), 6);
  ExpectSlots(*pager, 0);

  // No slot: refused, nothing changed (no block reference taken).
  const int32_t refs = pager->pool().ref_count(parent.block_ids()[0]);
  EXPECT_FALSE(pager->CanFork(parent));
  EXPECT_EQ(pager->Fork(parent, &copies).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pager->pool().ref_count(parent.block_ids()[0]), refs);
  EXPECT_EQ(copies.size(), 2u);

  // Each frees its own slot; the blocks stay with the others.
  parent.Reset();
  ExpectSlots(*pager, 1);
  EXPECT_EQ(a->state_slot(), 1);
  a->Reset();
  b->Reset();
  ExpectSlots(*pager, 3);
  EXPECT_EQ(pager->Stats().used_blocks, 0);
}

TEST(StateSlotsTest, SnapshotRestoreAndDrop) {
  auto pager = SlotPager(16, 3);
  BlockLease lease = Allocated(*pager, 0, 5);
  BlockLease other = Allocated(*pager, 50, 5);
  ASSERT_EQ(lease.state_slot(), 0);
  std::vector<StateCopy> copies;
  EXPECT_EQ(pager->RestoreSnapshot(&lease).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pager->DropSnapshot(&lease).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pager->Snapshot(&lease, nullptr).code(),
            absl::StatusCode::kInvalidArgument);

  // Snapshot, then drop: the state stays where it was.
  ASSERT_TRUE(pager->CanSnapshot(lease));
  ASSERT_TRUE(pager->Snapshot(&lease, &copies).ok());
  EXPECT_EQ(lease.snapshot_slot(), 2);
  EXPECT_EQ(copies, (std::vector<StateCopy>{{0, 2}}));
  ExpectSlots(*pager, 0);
  EXPECT_FALSE(pager->CanSnapshot(lease));  // has one already
  EXPECT_EQ(pager->Snapshot(&lease, &copies).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(pager->CanSnapshot(other));  // no slot free
  EXPECT_EQ(pager->Snapshot(&other, &copies).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(other.snapshot_slot(), -1);
  ASSERT_TRUE(pager->DropSnapshot(&lease).ok());
  EXPECT_EQ(lease.state_slot(), 0);
  EXPECT_EQ(lease.snapshot_slot(), -1);
  ExpectSlots(*pager, 1);

  // Snapshot, then restore: the snapshot's slot becomes the state's, and
  // the advanced state's slot is freed. No copy.
  copies.clear();
  ASSERT_TRUE(pager->Snapshot(&lease, &copies).ok());
  EXPECT_EQ(copies, (std::vector<StateCopy>{{0, 2}}));
  ASSERT_TRUE(pager->RestoreSnapshot(&lease).ok());
  EXPECT_EQ(lease.state_slot(), 2);
  EXPECT_EQ(lease.snapshot_slot(), -1);
  EXPECT_EQ(copies.size(), 1u);
  ExpectSlots(*pager, 1);
  EXPECT_EQ(pager->Stats().state_copies, 2);

  // A lease reset while it holds a snapshot frees both slots.
  ASSERT_TRUE(pager->Snapshot(&lease, &copies).ok());
  ExpectSlots(*pager, 0);
  lease.Reset();
  ExpectSlots(*pager, 2);
  other.Reset();
  ExpectSlots(*pager, 3);
}

TEST(StateSlotsTest, ThePrefixCacheIsOffWithSlots) {
  // The same prompt twice, after the first is computed and freed: without
  // slots the second hits the cache; with slots it starts at 0 (a cached
  // prefix would need the recurrent state at its end).
  for (const int32_t slots : {0, 2}) {
    SCOPED_TRACE(slots);
    auto pager = SlotPager(16, slots);
    const std::vector<int32_t> prompt = Range(0, 10);
    {
      BlockLease first = Allocated(*pager, 0, 10);
      ASSERT_TRUE(pager->MarkComputed(&first, 10).ok());
    }
    const int32_t want = slots > 0 ? 0 : 8;
    EXPECT_EQ(pager->CachedPrefixTokens(prompt, "t"), want);
    EXPECT_EQ(pager->Stats().cached_blocks, slots > 0 ? 0 : 2);
    BlockLease second = Allocated(*pager, 0, 10);
    EXPECT_EQ(second.num_cached_tokens(), want);
    EXPECT_EQ(second.num_computed_tokens(), want);
    EXPECT_EQ(pager->Stats().prefix_hit_tokens, want);
    EXPECT_EQ(pager->Stats().prefix_queries, 2);
    EXPECT_TRUE(pager->CheckConsistency().ok()) << pager->CheckConsistency();
  }
}

TEST(StateSlotsTest, HitsEndAtTheLastBlockWithASnapshot) {
  // kB = 4. A 14-token sequence computed, with the state kept after 8
  // (its second block); the same tokens again hit 8, not the 12 cached,
  // and the snapshot's state is copied into the new lease's slot.
  auto pager = SlotPager(16, 3);
  ASSERT_TRUE(pager->EnableStateSnapshots(2).ok());
  EXPECT_EQ(pager->EnableStateSnapshots(2).code(),
            absl::StatusCode::kFailedPrecondition);
  const std::vector<int32_t> prompt = Range(0, 14);
  std::vector<StateCopy> copies;
  int32_t first_slot = -1, kept = -1;
  {
    BlockLease first = Allocated(*pager, 0, 14);
    first_slot = first.state_slot();
    // Not computed that far yet: nothing kept.
    EXPECT_EQ(pager->KeepStateSnapshot(first, 8, -1, &copies), -1);
    ASSERT_TRUE(pager->MarkComputed(&first, 8).ok());
    EXPECT_EQ(pager->KeepStateSnapshot(first, 6, -1, &copies), -1);  // mid-block
    kept = pager->KeepStateSnapshot(first, 8, -1, &copies);
    EXPECT_EQ(kept, first.block_ids()[1]);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0].src, first_slot);
    ASSERT_TRUE(pager->MarkComputed(&first, 14).ok());
    // Kept once: a second call only touches it.
    EXPECT_EQ(pager->KeepStateSnapshot(first, 8, -1, &copies), kept);
    EXPECT_EQ(copies.size(), 1u);
  }
  const int32_t snapshot_slot = copies[0].dst;
  EXPECT_EQ(pager->Stats().state_snapshots, 1);
  EXPECT_EQ(pager->num_free_state_slots(), 2);  // the snapshot holds one
  EXPECT_EQ(pager->CachedPrefixTokens(prompt, "t"), 8);
  // Without a copy list there is no hit.
  {
    BlockLease cold = Allocated(*pager, 0, 14);
    EXPECT_EQ(cold.num_cached_tokens(), 0);
  }
  copies.clear();
  absl::StatusOr<BlockLease> second =
      pager->Allocate(prompt, "t", KvPager::kMaxSequenceTokens, &copies);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->num_cached_tokens(), 8);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0], (StateCopy{snapshot_slot, second->state_slot()}));
  EXPECT_EQ(pager->Stats().state_snapshot_hits, 1);
  EXPECT_TRUE(pager->CheckConsistency().ok()) << pager->CheckConsistency();
}

TEST(StateSlotsTest, SnapshotsGiveTheirSlotsToSequences) {
  // Two slots, one holding a snapshot: two sequences at once take it, and
  // the snapshot is gone (its prefix is then computed again).
  auto pager = SlotPager(16, 2);
  ASSERT_TRUE(pager->EnableStateSnapshots(2).ok());
  std::vector<StateCopy> copies;
  {
    BlockLease first = Allocated(*pager, 0, 10);
    ASSERT_TRUE(pager->MarkComputed(&first, 10).ok());
    EXPECT_GE(pager->KeepStateSnapshot(first, 8, -1, &copies), 0);
  }
  EXPECT_EQ(pager->num_free_state_slots(), 1);
  EXPECT_TRUE(pager->CanAllocate(Range(100, 5), "t"));
  BlockLease a = Allocated(*pager, 100, 5);
  EXPECT_TRUE(pager->CanAllocate(Range(200, 5), "t"));
  BlockLease b = Allocated(*pager, 200, 5);
  EXPECT_GE(b.state_slot(), 0);
  EXPECT_NE(a.state_slot(), b.state_slot());
  const PagerStats stats = pager->Stats();
  EXPECT_EQ(stats.state_snapshots, 0);
  EXPECT_EQ(stats.state_snapshot_evictions, 1);
  EXPECT_EQ(pager->CachedPrefixTokens(Range(0, 10), "t"), 0);
  // Every slot runs a sequence: nothing can be kept.
  ASSERT_TRUE(pager->MarkComputed(&a, 4).ok());
  EXPECT_EQ(pager->KeepStateSnapshot(a, 4, -1, &copies), -1);
  EXPECT_TRUE(pager->CheckConsistency().ok()) << pager->CheckConsistency();
}

TEST(StateSlotsTest, ARollingSnapshotReplacesItsPrevious) {
  // A generating sequence keeps its latest block boundary in one place.
  auto pager = SlotPager(16, 3);
  ASSERT_TRUE(pager->EnableStateSnapshots(2).ok());
  std::vector<StateCopy> copies;
  BlockLease lease = Allocated(*pager, 0, 5);
  std::vector<BlockCopy> block_copies;
  ASSERT_TRUE(pager->Append(&lease, Range(5, 7), &block_copies).ok());
  ASSERT_TRUE(pager->MarkComputed(&lease, 8).ok());
  const int32_t at8 = pager->KeepStateSnapshot(lease, 8, -1, &copies);
  ASSERT_GE(at8, 0);
  ASSERT_TRUE(pager->MarkComputed(&lease, 12).ok());
  const int32_t at12 = pager->KeepStateSnapshot(lease, 12, at8, &copies);
  ASSERT_GE(at12, 0);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].dst, copies[1].dst);  // the same place
  EXPECT_EQ(pager->Stats().state_snapshots, 1);
  EXPECT_TRUE(pager->CheckConsistency().ok()) << pager->CheckConsistency();
}

TEST(StateSlotsTest, SlotsBesideWindowedGroups) {
  // A hybrid model with sliding layers too: slots are per lease, not per
  // group; windowed groups still give their blocks back.
  auto pager = SlotPager(32, 2, {0, 8});
  BlockLease lease = Allocated(*pager, 0, 20);
  EXPECT_EQ(lease.state_slot(), 0);
  ASSERT_TRUE(pager->MarkComputed(&lease, 20).ok());
  EXPECT_LT(lease.num_blocks(1), lease.num_blocks(0));
  std::vector<StateCopy> copies;
  absl::StatusOr<BlockLease> fork = pager->Fork(lease, &copies);
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_EQ(copies, (std::vector<StateCopy>{{0, 1}}));
  ExpectSlots(*pager, 0);
  EXPECT_EQ(pager->Stats().cached_blocks, 0);
  lease.Reset();
  fork->Reset();
  ExpectSlots(*pager, 2);
  EXPECT_EQ(pager->Stats().used_blocks, 0);
}

// Random allocations, forks, snapshots (restored or dropped), growth and
// frees against a model: after every step the slots the live leases hold
// (state and snapshot) are distinct and exactly the pool's held slots,
// every check agrees with its act, a refused act changes nothing, and at
// the end every slot is free.
TEST(StateSlotsTest, RandomOperationsKeepTheSlotsExact) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    constexpr int32_t kSlots = 6;
    auto pager = SlotPager(64, kSlots);
    std::vector<BlockLease> leases;
    std::vector<StateCopy> copies;
    int64_t want_copies = 0;
    const auto pick = [&] {
      return static_cast<size_t>(rng() % leases.size());
    };
    for (int step = 0; step < 400; ++step) {
      SCOPED_TRACE(step);
      const int op = static_cast<int>(rng() % 6);
      const PagerStats before = pager->Stats();
      if (op == 0 || leases.empty()) {
        const std::vector<int32_t> prompt =
            Range(static_cast<int32_t>(rng() % 1000),
                  1 + static_cast<int32_t>(rng() % 9));
        const bool can = pager->CanAllocate(prompt, "t");
        absl::StatusOr<BlockLease> lease = pager->Allocate(prompt, "t");
        ASSERT_EQ(can, lease.ok()) << lease.status();
        if (lease.ok()) {
          leases.push_back(*std::move(lease));
        } else {
          EXPECT_EQ(pager->Stats().free_state_slots, before.free_state_slots);
          EXPECT_EQ(pager->Stats().used_blocks, before.used_blocks);
        }
      } else if (op == 1) {
        const size_t i = pick();
        const bool can = pager->CanFork(leases[i]);
        absl::StatusOr<BlockLease> fork = pager->Fork(leases[i], &copies);
        ASSERT_EQ(can, fork.ok()) << fork.status();
        if (fork.ok()) {
          ++want_copies;
          EXPECT_EQ(copies.back(),
                    (StateCopy{leases[i].state_slot(), fork->state_slot()}));
          leases.push_back(*std::move(fork));
        } else {
          EXPECT_EQ(pager->Stats().used_blocks, before.used_blocks);
        }
      } else if (op == 2) {
        BlockLease& lease = leases[pick()];
        const bool can = pager->CanSnapshot(lease);
        const absl::Status s = pager->Snapshot(&lease, &copies);
        ASSERT_EQ(can, s.ok()) << s;
        if (s.ok()) {
          ++want_copies;
          EXPECT_EQ(copies.back(),
                    (StateCopy{lease.state_slot(), lease.snapshot_slot()}));
        }
      } else if (op == 3) {
        BlockLease& lease = leases[pick()];
        const int32_t snapshot = lease.snapshot_slot();
        const bool restore = rng() % 2 == 0;
        const absl::Status s = restore ? pager->RestoreSnapshot(&lease)
                                       : pager->DropSnapshot(&lease);
        ASSERT_EQ(s.ok(), snapshot >= 0) << s;
        if (s.ok() && restore) {
          EXPECT_EQ(lease.state_slot(), snapshot);
        }
        EXPECT_EQ(lease.snapshot_slot(), -1);
      } else if (op == 4) {
        BlockLease& lease = leases[pick()];
        std::vector<BlockCopy> block_copies;
        if (pager->CanAppend(lease, 3)) {
          ASSERT_TRUE(pager->Append(&lease, Range(7, 3), &block_copies).ok());
        }
      } else {
        const size_t i = pick();
        leases.erase(leases.begin() + static_cast<std::ptrdiff_t>(i));
      }
      // The model: distinct held slots, exactly the pool's.
      std::vector<bool> held(kSlots, false);
      int32_t num_held = 0;
      for (const BlockLease& lease : leases) {
        ASSERT_GE(lease.state_slot(), 0);
        ASSERT_LT(lease.state_slot(), kSlots);
        ASSERT_FALSE(held[lease.state_slot()]);
        held[lease.state_slot()] = true;
        ++num_held;
        if (lease.snapshot_slot() >= 0) {
          ASSERT_LT(lease.snapshot_slot(), kSlots);
          ASSERT_FALSE(held[lease.snapshot_slot()]);
          held[lease.snapshot_slot()] = true;
          ++num_held;
        }
      }
      for (int32_t slot = 0; slot < kSlots; ++slot) {
        EXPECT_EQ(pager->state_slot_held(slot), held[slot]) << slot;
      }
      ExpectSlots(*pager, kSlots - num_held);
      EXPECT_EQ(pager->Stats().state_copies, want_copies);
    }
    leases.clear();
    ExpectSlots(*pager, kSlots);
    EXPECT_EQ(pager->Stats().used_blocks, 0);
  }
}

}  // namespace
}  // namespace paceline::kvpager
