// LibTorch's own c10d::TCPStore client (Debian's LibTorch 1.13, the one the worker SDK uses)
// against the store served in-process: the C++-only queries (check, and watchKey, which opens
// a second "callback" connection) and the rest of the Store API. Built with DDPRUN_WITH_TORCH.
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <condition_variable>
#include <mutex>

#include "tests/store/store_test_util.h"

namespace ddprun::store::testing {
namespace {

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

c10d::TCPStoreOptions client_options(uint16_t port) {
  c10d::TCPStoreOptions o;
  o.port = port;
  o.isServer = false;
  o.numWorkers = 1;
  o.timeout = std::chrono::seconds(30);
  return o;
}

TEST(LibTorchClientTest, EveryStoreQueryIncludingCheckAndWatchKey) {
  StoreThread server;
  c10d::TCPStore store("127.0.0.1", client_options(server.port()));
  store.set("a", bytes("1"));
  EXPECT_TRUE(store.check({"a"}));
  EXPECT_FALSE(store.check({"a", "b"}));
  EXPECT_EQ(text(store.get("a")), "1");
  EXPECT_EQ(store.add("n", 41), 41);
  EXPECT_EQ(store.add("n", 1), 42);
  EXPECT_EQ(text(store.compareSet("a", bytes("1"), bytes("2"))), "2");

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> events;
  store.watchKey("w", [&](c10::optional<std::string> before, c10::optional<std::string> after) {
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back(before.value_or("<none>") + "->" + after.value_or("<none>"));
    changed.notify_all();
  });
  store.set("w", bytes("x"));
  store.set("w", bytes("y"));
  EXPECT_TRUE(store.deleteKey("w"));
  {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(
        changed.wait_for(lock, std::chrono::seconds(10), [&] { return events.size() >= 3; }))
        << events.size() << " watch events";
  }
  EXPECT_EQ(events, (std::vector<std::string>{"<none>->x", "x->y", "y-><none>"}));

  EXPECT_THROW(store.wait({"never"}, std::chrono::milliseconds(200)), std::exception);
  EXPECT_EQ(store.getNumKeys(), 3);  // init/, a, n: the timed-out wait left nothing behind
  const StoreStats s = server.stats();
  EXPECT_EQ(s.connections_legacy, 2u);  // the client and its callback connection
  EXPECT_EQ(s.ops(Op::kWatchKey), 1u);
  EXPECT_EQ(s.ops(Op::kCheck), 2u);
  EXPECT_EQ(s.protocol_errors, 0u);
}

}  // namespace
}  // namespace ddprun::store::testing
