// MemoryStateStore: what the server's unit tests rely on (posted completions, order, injected
// failures).
#include <gtest/gtest.h>

#include "rendezvous/state/memory_state_store.h"
#include "tests/rendezvous/state/state_test_util.h"

namespace ddprun::rdzv::state {
namespace {

TEST(MemoryStateStoreTest, CompletesLaterInOrderAndLoadsWhatWasSaved) {
  boost::asio::io_context io;
  MemoryStateStore store(io);
  std::vector<std::string> completed;
  store.save("a", "1", [&](Status s) { completed.push_back(s ? "a1" : s.message()); });
  store.save("b", "2", [&](Status s) { completed.push_back(s ? "b2" : s.message()); });
  store.save("a", "3", [&](Status s) { completed.push_back(s ? "a3" : s.message()); });
  store.save("b", std::nullopt, [&](Status s) { completed.push_back(s ? "b-" : s.message()); });
  EXPECT_TRUE(completed.empty()) << "a completion ran inside save()";
  io.run();
  EXPECT_EQ(completed, (std::vector<std::string>{"a1", "b2", "a3", "b-"}));
  auto all = store.load_all();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(testing::job_records(*all), (std::map<std::string, std::string>{{"a", "3"}}));
  EXPECT_EQ(store.save_count(), 4u);
}

TEST(MemoryStateStoreTest, InjectedFailureAppliesNothing) {
  boost::asio::io_context io;
  MemoryStateStore store(io);
  store.save("a", "1", [](Status) {});
  store.fail_with(Status::unavailable("disk on fire"));
  std::optional<Status> result;
  store.save("a", "2", [&](Status s) { result = s; });
  EXPECT_FALSE(store.load_all().ok());
  io.run();
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->is_unavailable());
  store.fail_with(Status());
  EXPECT_EQ(store.load_all()->at("a").job, "1");
}

}  // namespace
}  // namespace ddprun::rdzv::state
