// Replicas on the wire, in-process: a server that redirects (RendezvousServer::
// redirect_clients, as a ddp-rendezvous replica that does not lead) and clients given one or
// several addresses (ClientOptions::more_servers). The etcd side and real processes are in
// tests/multinode/ha_test.cc.
#include <gtest/gtest.h>

#include "tests/rendezvous/rdzv_test_util.h"

namespace ddprun::rdzv::testing {
namespace {

class RedirectTest : public ::testing::Test {
 protected:
  // Connects a node (through whatever redirects) and has it join a 1-node job.
  std::unique_ptr<TestNode> join_alone(ClientOptions options) {
    auto node = start_node(io_, std::move(options));
    EXPECT_TRUE(run_until(io_, [&] { return node->connected.has_value(); }));
    EXPECT_TRUE(node->connected && node->connected->ok())
        << (node->connected ? node->connected->message() : "no answer");
    start_join(*node, join_request("a", 1, 1));
    EXPECT_TRUE(run_until(io_, [&] { return node->assignment.has_value(); }));
    EXPECT_TRUE(node->assignment && node->assignment->ok())
        << (node->assignment ? node->assignment->error_message() : "no answer");
    return node;
  }
  boost::asio::io_context io_;
};

TEST_F(RedirectTest, AClientFollowsAFollowersRedirectToTheLeader) {
  ServerThread leader;
  ServerThread follower;
  follower.redirect_clients(Redirect{"127.0.0.1", leader.port()});
  auto node = join_alone(node_options(follower.port(), "job", 0));
  EXPECT_EQ(leader.stats().jobs, 1u);
  EXPECT_EQ(follower.stats().jobs, 0u);  // it served nobody
}

TEST_F(RedirectTest, AClientTriesEveryAddressInTurn) {
  ServerThread server;
  ClientOptions o = node_options(1, "job", 0);  // port 1: nothing listens there
  o.more_servers = {{"127.0.0.1", server.port()}};
  auto node = join_alone(o);
  EXPECT_EQ(server.stats().jobs, 1u);
}

TEST_F(RedirectTest, NoLeaderIsRetriedUntilTheDeadlineAndSaidSo) {
  ServerThread electing;
  electing.redirect_clients(Redirect{});
  ClientOptions o = node_options(electing.port(), "job", 0);
  o.connect_timeout = 400ms;
  auto node = start_node(io_, o);
  ASSERT_TRUE(run_until(io_, [&] { return node->connected.has_value(); }));
  ASSERT_FALSE(node->connected->ok());
  EXPECT_TRUE(node->connected->is_unavailable()) << node->connected->message();
  EXPECT_NE(node->connected->message().find("no replica leads"), std::string::npos)
      << node->connected->message();
}

TEST_F(RedirectTest, ALeaderThatStepsDownSendsItsClientsToTheNextLeader) {
  ServerThread first;
  ServerThread second;
  ClientOptions o = node_options(first.port(), "job", 0);
  o.more_servers = {{"127.0.0.1", second.port()}};
  o.heartbeat_timeout = 2s;  // the reconnect window
  auto node = join_alone(o);
  ASSERT_FALSE(HasFailure());
  // Without a shared store the second server does not know the job: its refusal of the
  // resume shows that the client went there after the first server stepped down.
  first.redirect_clients(Redirect{"127.0.0.1", second.port()});
  ASSERT_TRUE(run_until(
      io_, [&] { return node->count<ConnectionLost>() == 1; }, 5s));
  const std::string why = node->last<ConnectionLost>()->message;
  EXPECT_NE(why.find("lost the rendezvous server at 127.0.0.1:" + std::to_string(second.port())),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("refused to resume"), std::string::npos) << why;
  EXPECT_EQ(first.stats().jobs, 0u);  // its jobs dropped from memory
}

}  // namespace
}  // namespace ddprun::rdzv::testing
