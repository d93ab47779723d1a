#include <string>

#include "gtest/gtest.h"
#include "paceline/v1/model.pb.h"

namespace paceline {
namespace {

TEST(ModelProtoTest, MemoryPlanRoundTripsAndKeepsPresence) {
  v1::MemoryPlan plan;
  plan.set_weights_bytes(14'000'000'000ULL);
  plan.set_kv_bytes_per_token(524'288);
  std::string wire;
  ASSERT_TRUE(plan.SerializeToString(&wire));

  v1::MemoryPlan back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.weights_bytes(), 14'000'000'000ULL);
  EXPECT_EQ(back.kv_bytes_per_token(), 524'288u);
  // `memory_bytes` is optional: unset differs from zero.
  EXPECT_FALSE(back.has_memory_bytes());
  back.set_memory_bytes(0);
  EXPECT_TRUE(back.has_memory_bytes());
}

}  // namespace
}  // namespace paceline
