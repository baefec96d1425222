// A registry restored from its state store (JobRegistry::restore) against the moments a server
// can be killed at: here, after a join was recorded but before its answer reached the node.
// The node never got its token, so it sends the same join again (same request id) to the new
// server; that must be answered as before, not taken for a restarted node (which opens a new
// round and restarts every other node of the job).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "rdzv_test_util.h"
#include "rendezvous/server/job_registry.h"
#include "rendezvous/state/memory_state_store.h"

namespace ddprun::rdzv {
namespace {

// A connection as the registry sees it: what it was sent, in order.
struct RestoredPeer final : Peer {
  std::vector<ServerMessage> sent;
  void send(const ServerMessage& message) override { sent.push_back(message); }
  void kick(const std::string&) override {}

  template <class M>
  std::vector<M> all() const {
    std::vector<M> out;
    for (const auto& m : sent)
      if (const auto* typed = std::get_if<M>(&m)) out.push_back(*typed);
    return out;
  }
};

JoinMsg restore_join_msg(uint32_t request_id, const std::string& node) {
  JoinRequest r = testing::join_request(node, 2, 2);
  r.job.heartbeat_timeout = std::chrono::seconds(60);
  return JoinMsg{request_id, r.node, r.job};
}

class JobRegistryRestoreTest : public ::testing::Test {
 protected:
  // Runs what is ready (the store's completions and the deliveries), not the timers.
  void settle() {
    io_.restart();
    while (io_.poll() > 0) {
    }
  }
  // A first server: nodes a (request 101) and b (request 202) join a 2-node job; the round
  // closes and is recorded. Returns b's token and group rank as the first server gave them.
  std::pair<int64_t, uint32_t> first_server_closes_the_round() {
    JobRegistry first(io_.get_executor(), SystemClock::instance());
    EXPECT_TRUE(first.restore(store_, [](const Status&) {}).ok());
    RestoredPeer a, b;
    std::string node_a, node_b;
    first.join(first.open_connection("j"), a, restore_join_msg(101, "a"), node_a);
    first.join(first.open_connection("j"), b, restore_join_msg(202, "b"), node_b);
    settle();
    first.cancel_timers();
    first.stop_recording();
    const auto replies = b.all<Reply>();
    const auto assigned = b.all<RoundAssigned>();
    EXPECT_EQ(replies.size(), 1u);
    EXPECT_EQ(assigned.size(), 1u);
    if (replies.empty() || assigned.empty()) return {0, 0};
    return {replies[0].integer, assigned[0].group_rank};
  }

  // The server restarted on the first one's state, and node b's join sent to it with
  // `request_id`: what b's new connection is sent.
  // (The peer is the fixture's: the registry keeps a pointer to it.)
  const RestoredPeer& b_joins_the_restored_server(uint32_t request_id) {
    second_.emplace(io_.get_executor(), SystemClock::instance());
    EXPECT_TRUE(second_->restore(store_, [](const Status&) {}).ok());
    std::string node_b;
    second_->join(second_->open_connection("j"), b_again_, restore_join_msg(request_id, "b"),
                  node_b);
    settle();
    return b_again_;
  }
  // The round the restored server's job is in.
  uint64_t restored_round() const {
    const auto views = second_->views();
    return views.size() == 1 && views[0].round ? views[0].round->round : UINT64_MAX;
  }
  void TearDown() override {
    if (!second_) return;
    second_->cancel_timers();
    second_->stop_recording();
  }

  boost::asio::io_context io_;
  state::MemoryStateStore store_{io_};
  RestoredPeer b_again_;  // before second_: destroyed after it
  std::optional<JobRegistry> second_;
};

TEST_F(JobRegistryRestoreTest, AJoinSentAgainAfterTheRestartGetsItsAnswerAndItsAssignment) {
  const auto [token, rank] = first_server_closes_the_round();
  ASSERT_NE(token, 0);
  // The first server is gone; b's answer, as far as b knows, never came: the same join again.
  const RestoredPeer& b_again = b_joins_the_restored_server(202);
  const auto replies = b_again.all<Reply>();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_TRUE(replies[0].ok) << replies[0].error;
  EXPECT_EQ(replies[0].integer, token) << "the same membership, not a new one";
  const auto assigned = b_again.all<RoundAssigned>();
  ASSERT_EQ(assigned.size(), 1u) << "the round it was assigned to before the kill";
  EXPECT_EQ(assigned[0].round, 0u);
  EXPECT_EQ(assigned[0].group_rank, rank);
  EXPECT_TRUE(b_again.all<RestartRequested>().empty());
  // a, resuming with its token, finds round 0 running too: no new round was opened.
  EXPECT_EQ(restored_round(), 0u);
}

TEST_F(JobRegistryRestoreTest, AJoinWithANewRequestIdIsARestartedNodeAndRestartsTheJob) {
  first_server_closes_the_round();
  const RestoredPeer& b_restarted = b_joins_the_restored_server(303);
  ASSERT_EQ(b_restarted.all<Reply>().size(), 1u);
  EXPECT_TRUE(b_restarted.all<RoundAssigned>().empty()) << "round 1 waits for a";
  EXPECT_EQ(restored_round(), 1u);
}

}  // namespace
}  // namespace ddprun::rdzv
