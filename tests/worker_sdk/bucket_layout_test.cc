// Bucket assignment: caps, one bucket stream per kind, and the ready order completed.
#include "worker_sdk/src/bucket_layout.h"

#include <gtest/gtest.h>

namespace ddp::detail {
namespace {

using Buckets = std::vector<std::vector<std::size_t>>;

TEST(BucketLayoutTest, ABucketClosesOnceItReachesItsCapIncludingTheParameterThatCrossesIt) {
  const std::vector<BucketParam> params = {{100, "f"}, {200, "f"}, {50, "f"}, {400, "f"}};
  EXPECT_EQ(assign_buckets(params, reverse_registration_order(4), 300, 300),
            (Buckets{{3}, {2, 1, 0}}));
  // A small first bucket, large later ones.
  EXPECT_EQ(assign_buckets(params, {0, 1, 2, 3}, 100, 1000), (Buckets{{0}, {1, 2, 3}}));
}

TEST(BucketLayoutTest, EachKindFillsItsOwnBucketsWithItsOwnFirstCap) {
  const std::vector<BucketParam> params = {
      {64, "float"}, {64, "double"}, {64, "float"}, {64, "double"}, {64, "float"}};
  EXPECT_EQ(assign_buckets(params, {0, 1, 2, 3, 4}, 64, 128), (Buckets{{0}, {1}, {2, 4}, {3}}));
}

TEST(BucketLayoutTest, CompleteOrderKeepsTheFirstReadinessAndAppendsTheRestInReverse) {
  EXPECT_EQ(complete_order({2, 0, 2, 9}, 4), (std::vector<std::size_t>{2, 0, 3, 1}));
  EXPECT_EQ(complete_order({}, 3), reverse_registration_order(3));
}

}  // namespace
}  // namespace ddp::detail
