#include "rendezvous/kv_store.h"

#include <gtest/gtest.h>

namespace ddprun::rdzv {
namespace {

TEST(KvStoreTest, SetGetAddDeleteCount) {
  KvStore kv;
  kv.set(KvScope::kJob, "a", "1");
  EXPECT_EQ(kv.get(KvScope::kJob, "a"), "1");
  EXPECT_FALSE(kv.get(KvScope::kRound, "a").has_value());
  EXPECT_EQ(*kv.add(KvScope::kJob, "a", 5), 6);
  EXPECT_EQ(*kv.add(KvScope::kJob, "n", -2), -2);
  kv.set(KvScope::kJob, "s", "text");
  EXPECT_FALSE(kv.add(KvScope::kJob, "s", 1).ok());
  EXPECT_EQ(kv.num_keys(KvScope::kJob), 3);
  EXPECT_TRUE(kv.erase(KvScope::kJob, "a"));
  EXPECT_FALSE(kv.erase(KvScope::kJob, "a"));
  EXPECT_EQ(kv.num_keys(KvScope::kJob), 2);
}

TEST(KvStoreTest, CompareSetFollowsC10dSemantics) {
  KvStore kv;
  EXPECT_EQ(kv.compare_set(KvScope::kJob, "k", "", "first"), "first");  // absent == ""
  EXPECT_EQ(kv.compare_set(KvScope::kJob, "k", "wrong", "x"), "first");
  EXPECT_EQ(kv.compare_set(KvScope::kJob, "k", "first", "second"), "second");
}

TEST(KvStoreTest, WaitCompletesWhenAllKeysExistAndCanBeCancelled) {
  KvStore kv;
  int done = 0;
  kv.set(KvScope::kJob, "a", "1");
  EXPECT_EQ(kv.wait(KvScope::kJob, {"a"}, [&] { ++done; }), 0u);
  EXPECT_EQ(done, 1);
  const auto id = kv.wait(KvScope::kJob, {"a", "b", "c"}, [&] { ++done; });
  EXPECT_NE(id, 0u);
  kv.set(KvScope::kJob, "b", "1");
  EXPECT_EQ(done, 1);
  kv.set(KvScope::kJob, "c", "1");
  EXPECT_EQ(done, 2);
  const auto cancelled = kv.wait(KvScope::kJob, {"z"}, [&] { ++done; });
  kv.cancel_wait(cancelled);
  kv.set(KvScope::kJob, "z", "1");
  EXPECT_EQ(done, 2);
  EXPECT_EQ(kv.pending_waits(), 0u);
}

TEST(KvStoreTest, RoundScopeIsClearedAndSeparateFromJobScope) {
  KvStore kv;
  kv.set(KvScope::kRound, "barrier", "1");
  kv.set(KvScope::kJob, "barrier", "job");
  EXPECT_EQ(kv.num_keys(KvScope::kRound), 1);
  kv.clear_round();
  EXPECT_EQ(kv.num_keys(KvScope::kRound), 0);
  EXPECT_FALSE(kv.get(KvScope::kRound, "barrier").has_value());
  EXPECT_EQ(kv.get(KvScope::kJob, "barrier"), "job");
}

}  // namespace
}  // namespace ddprun::rdzv
