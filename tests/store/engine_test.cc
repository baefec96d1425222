// The store's data engine without sockets: c10d semantics (compare_set's three cases, add on
// decimal strings, append, multi ops, queues), waits and watches through fake clients, and the
// key/byte limits with their refusals.
#include "store/engine.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace ddprun::store {
namespace {

struct FakeClient : StoreEngine::Client {
  int waits_done = 0;
  std::vector<WatchEvent> events;
  void wait_done() override { ++waits_done; }
  void key_changed(const WatchEvent& e) override { events.push_back(e); }
};

using Keys = std::vector<std::string>;

TEST(StoreEngineTest, SetGetEraseAndCount) {
  StoreEngine store;
  EXPECT_FALSE(store.get("k"));
  ASSERT_TRUE(store.set("k", "v").ok());
  ASSERT_TRUE(store.set("k", "v2").ok());
  EXPECT_EQ(store.get("k"), "v2");
  EXPECT_EQ(store.num_keys(), 1);
  EXPECT_EQ(store.bytes(), 3u);
  EXPECT_TRUE(store.erase("k"));
  EXPECT_FALSE(store.erase("k"));
  EXPECT_EQ(store.num_keys(), 0);
  EXPECT_EQ(store.bytes(), 0u);
}

// The three cases as torch 1.13's own server answers them (captured in codec_test's session).
TEST(StoreEngineTest, CompareSetFollowsC10d) {
  StoreEngine store;
  EXPECT_EQ(store.compare_set("absent", "x", "new").value(), "x");  // stays missing
  EXPECT_FALSE(store.get("absent"));
  EXPECT_EQ(store.compare_set("k", "", "v1").value(), "v1");  // created
  EXPECT_EQ(store.compare_set("k", "wrong", "v2").value(), "v1");
  EXPECT_EQ(store.compare_set("k", "v1", "v2").value(), "v2");
  EXPECT_EQ(store.get("k"), "v2");
}

TEST(StoreEngineTest, AddWorksOnDecimalStrings) {
  StoreEngine store;
  EXPECT_EQ(store.add("n", 5).value(), 5);
  EXPECT_EQ(store.add("n", -7).value(), -2);
  EXPECT_EQ(store.get("n"), "-2");
  ASSERT_TRUE(store.set("s", "abc").ok());
  auto bad = store.add("s", 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().is_invalid_argument());
  EXPECT_EQ(store.get("s"), "abc");
  ASSERT_TRUE(store.set("big", "9223372036854775807").ok());
  EXPECT_FALSE(store.add("big", 1).ok());
}

TEST(StoreEngineTest, AppendAndMultiOps) {
  StoreEngine store;
  ASSERT_TRUE(store.append("a", "x").ok());
  ASSERT_TRUE(store.append("a", "yz").ok());
  EXPECT_EQ(store.get("a"), "xyz");
  ASSERT_TRUE(store.multi_set({"p", "q"}, {"1", "2"}).ok());
  EXPECT_EQ(store.get("p"), "1");
  EXPECT_EQ(store.get("q"), "2");
  EXPECT_TRUE(store.check({"a", "p", "q"}));
  EXPECT_FALSE(store.check({"a", "nope"}));
  EXPECT_TRUE(store.check({}));
}

TEST(StoreEngineTest, WaitCompletesOnceEveryMissingKeyIsWritten) {
  StoreEngine store;
  FakeClient c;
  ASSERT_TRUE(store.set("a", "1").ok());
  EXPECT_TRUE(store.wait(c, {"a"}));  // already there: no pending wait
  EXPECT_FALSE(store.has_pending_wait(c));
  EXPECT_FALSE(store.wait(c, {"a", "b", "c", "b"}));
  ASSERT_TRUE(store.set("b", "1").ok());
  EXPECT_EQ(c.waits_done, 0);
  ASSERT_TRUE(store.add("c", 1).ok());
  EXPECT_EQ(c.waits_done, 1);
  EXPECT_FALSE(store.has_pending_wait(c));
  EXPECT_EQ(store.pending_waits(), 0u);
}

TEST(StoreEngineTest, ManyWaitersOnOneKeyAllWake) {
  StoreEngine store;
  std::vector<FakeClient> clients(10);
  for (auto& c : clients) EXPECT_FALSE(store.wait(c, {"go"}));
  ASSERT_TRUE(store.compare_set("go", "", "1").ok());
  for (auto& c : clients) EXPECT_EQ(c.waits_done, 1);
}

TEST(StoreEngineTest, CancelledAndForgottenWaitsNeverFire) {
  StoreEngine store;
  FakeClient cancelled, forgotten, replaced;
  EXPECT_FALSE(store.wait(cancelled, {"k"}));
  EXPECT_FALSE(store.wait(forgotten, {"k"}));
  EXPECT_FALSE(store.wait(replaced, {"k"}));
  EXPECT_FALSE(store.wait(replaced, {"other"}));  // a new wait ends the previous one
  EXPECT_TRUE(store.cancel_wait(cancelled));
  EXPECT_FALSE(store.cancel_wait(cancelled));
  store.forget(forgotten);
  ASSERT_TRUE(store.set("k", "v").ok());
  EXPECT_EQ(cancelled.waits_done + forgotten.waits_done + replaced.waits_done, 0);
  ASSERT_TRUE(store.set("other", "v").ok());
  EXPECT_EQ(replaced.waits_done, 1);
}

TEST(StoreEngineTest, DeletingDoesNotSatisfyAWait) {
  StoreEngine store;
  FakeClient c;
  EXPECT_FALSE(store.wait(c, {"k"}));
  store.erase("k");
  EXPECT_EQ(c.waits_done, 0);
  ASSERT_TRUE(store.append("k", "x").ok());
  EXPECT_EQ(c.waits_done, 1);
}

TEST(StoreEngineTest, WatchersSeeEveryChange) {
  StoreEngine store;
  FakeClient w;
  store.watch(w, "k");
  store.watch(w, "k");  // once is enough
  ASSERT_TRUE(store.set("k", "a").ok());
  ASSERT_TRUE(store.set("k", "b").ok());
  ASSERT_TRUE(store.append("k", "c").ok());
  ASSERT_TRUE(store.add("other", 1).ok());
  store.erase("k");
  ASSERT_EQ(w.events.size(), 4u);
  EXPECT_EQ(w.events[0].kind, WatchKind::kCreated);
  EXPECT_EQ(w.events[0].new_value, "a");
  EXPECT_EQ(w.events[1].kind, WatchKind::kUpdated);
  EXPECT_EQ(w.events[1].old_value, "a");
  EXPECT_EQ(w.events[1].new_value, "b");
  EXPECT_EQ(w.events[2].kind, WatchKind::kAppended);
  EXPECT_EQ(w.events[2].new_value, "c");
  EXPECT_EQ(w.events[3].kind, WatchKind::kDeleted);
  EXPECT_EQ(w.events[3].old_value, "bc");
  EXPECT_EQ(store.watches(), 1u);
  store.forget(w);
  EXPECT_EQ(store.watches(), 0u);
  ASSERT_TRUE(store.set("k", "again").ok());
  EXPECT_EQ(w.events.size(), 4u);
}

TEST(StoreEngineTest, QueuesFeedOneWaiterPerItem) {
  StoreEngine store;
  FakeClient first, second;
  EXPECT_FALSE(store.wait(first, {"q"}));
  EXPECT_FALSE(store.wait(second, {"q"}));
  ASSERT_TRUE(store.queue_push("q", "item1").ok());
  EXPECT_EQ(first.waits_done, 1);
  EXPECT_EQ(second.waits_done, 0);
  EXPECT_TRUE(store.check({"q"}));  // a non-empty queue exists
  EXPECT_EQ(store.num_keys(), 0);   // but is not a key
  ASSERT_TRUE(store.queue_push("q", "item2").ok());
  EXPECT_EQ(second.waits_done, 1);
  EXPECT_EQ(store.queue_len("q"), 2);
  auto a = store.queue_pop("q");
  EXPECT_EQ(a.length_before, 2);
  EXPECT_EQ(a.value, "item1");
  EXPECT_EQ(store.queue_pop("q").value, "item2");
  auto empty = store.queue_pop("q");
  EXPECT_EQ(empty.length_before, 0);
  EXPECT_FALSE(empty.value);
  EXPECT_FALSE(store.check({"q"}));
  EXPECT_EQ(store.bytes(), 0u);
  EXPECT_EQ(store.queued_items(), 0u);
}

// c10d 2.x's barrier, as torch 2.15's own servers (libuv and the older one) answer it: each call
// adds 1 to the key's counter; the calls wait until it reaches the world size; later calls
// return at once; a timed-out (cancelled) barrier has still been counted.
TEST(StoreEngineTest, BarrierReleasesEveryoneWhenTheLastArrives) {
  StoreEngine store;
  FakeClient first, second, third, late;
  EXPECT_EQ(store.barrier(first, "b", 3).value(), false);
  EXPECT_EQ(store.barrier(second, "b", 3).value(), false);
  EXPECT_EQ(first.waits_done + second.waits_done, 0);
  EXPECT_EQ(store.barrier(third, "b", 3).value(), true);  // the last one hears it at once
  EXPECT_EQ(first.waits_done, 1);
  EXPECT_EQ(second.waits_done, 1);
  EXPECT_EQ(third.waits_done, 0);
  EXPECT_EQ(store.pending_waits(), 0u);
  EXPECT_EQ(store.get("b"), "3");
  EXPECT_EQ(store.barrier(late, "b", 3).value(), true);
  EXPECT_EQ(store.get("b"), "4");
}

TEST(StoreEngineTest, ACancelledBarrierStillCountsAndNeverFires) {
  StoreEngine store;
  FakeClient gave_up, waiting, last;
  EXPECT_FALSE(store.barrier(gave_up, "b", 3).value());
  EXPECT_TRUE(store.cancel_wait(gave_up));
  EXPECT_FALSE(store.barrier(waiting, "b", 3).value());
  EXPECT_TRUE(store.barrier(last, "b", 3).value());
  EXPECT_EQ(gave_up.waits_done, 0);
  EXPECT_EQ(waiting.waits_done, 1);
  EXPECT_EQ(store.get("b"), "3");
}

TEST(StoreEngineTest, ABarrierOnANonIntegerKeyIsAnErrorAndLeavesNothingPending) {
  StoreEngine store;
  FakeClient client;
  ASSERT_TRUE(store.set("b", "text").ok());
  auto reached = store.barrier(client, "b", 2);
  ASSERT_FALSE(reached.ok());
  EXPECT_TRUE(reached.status().is_invalid_argument());
  EXPECT_FALSE(store.has_pending_wait(client));
}

TEST(StoreEngineTest, BarriersAndWaitsOnOneKeyEachWakeByTheirOwnRule) {
  StoreEngine store;
  FakeClient barrier, waiter;
  EXPECT_FALSE(store.barrier(barrier, "b", 3).value());  // counter 1
  EXPECT_FALSE(store.wait(waiter, {"q"}));
  ASSERT_TRUE(store.queue_push("b", "item").ok());  // a queue of the same name: no counter
  EXPECT_EQ(barrier.waits_done, 0);
  ASSERT_TRUE(store.add("b", 1).ok());  // counter 2: not yet
  EXPECT_EQ(barrier.waits_done, 0);
  ASSERT_TRUE(store.add("b", 1).ok());  // counter 3: a plain add completes it too
  EXPECT_EQ(barrier.waits_done, 1);
  EXPECT_EQ(waiter.waits_done, 0);
}

TEST(StoreEngineTest, ListKeysNamesEveryPlainKey) {
  StoreEngine store;
  ASSERT_TRUE(store.set("/a", "1").ok());
  ASSERT_TRUE(store.set("/bb", "2").ok());
  ASSERT_TRUE(store.queue_push("/q", "item").ok());
  auto keys = store.list_keys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (Keys{"/a", "/bb"}));
}

TEST(StoreEngineTest, KeyLimitRefusesNewKeysOnly) {
  StoreEngine store(StoreLimits{2, 1 << 20});
  ASSERT_TRUE(store.set("a", "1").ok());
  ASSERT_TRUE(store.queue_push("q", "x").ok());
  Status refused = store.set("b", "1");
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.is_refused());
  EXPECT_NE(refused.message().find("max_keys (2)"), std::string::npos) << refused.message();
  EXPECT_FALSE(store.get("b"));
  EXPECT_FALSE(store.add("c", 1).ok());
  EXPECT_FALSE(store.compare_set("d", "", "x").ok());
  EXPECT_TRUE(store.set("a", "2").ok());  // overwriting needs no new key
  EXPECT_TRUE(store.queue_push("q", "y").ok());
  EXPECT_EQ(store.refusals(), 3u);
}

TEST(StoreEngineTest, ByteLimitRefusesGrowthAndLeavesDataAsItWas) {
  StoreEngine store(StoreLimits{100, 10});
  ASSERT_TRUE(store.set("k", "12345").ok());  // 6 bytes
  EXPECT_FALSE(store.set("k", "1234567890").ok());
  EXPECT_FALSE(store.append("k", "abcde").ok());
  EXPECT_FALSE(store.queue_push("q", "abcdef").ok());
  EXPECT_EQ(store.get("k"), "12345");
  EXPECT_TRUE(store.set("k", "1").ok());  // shrinking is always allowed
  EXPECT_TRUE(store.append("k", "234").ok());
  // multi_set is admitted whole or not at all.
  EXPECT_FALSE(store.multi_set({"x", "y"}, {"1", "2345"}).ok());
  EXPECT_FALSE(store.get("x"));
  EXPECT_EQ(store.refusals(), 4u);
  EXPECT_EQ(store.bytes(), 5u);
}

}  // namespace
}  // namespace ddprun::store
