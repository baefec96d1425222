// Hostile and broken connections while a job runs: garbage, an oversized frame, a half-sent
// frame, a silent socket, a wrong protocol version. Each is dropped after its deadline; the
// job's members notice nothing. Also: a node whose connection drops and comes back within
// heartbeat_timeout keeps its membership and rank. And from the other side: a server that
// accepts requests but never answers them does not hang the client.
#include <poll.h>

#include <array>
#include <atomic>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include "rendezvous/client/connector.h"
#include "rendezvous/wire/codec.h"
#include "tests/rendezvous/rdzv_test_util.h"

namespace ddprun::rdzv::testing {
namespace {

using boost::asio::ip::tcp;

// A blocking raw socket to the server; reads are bounded with poll().
class RawPeer {
 public:
  RawPeer(boost::asio::io_context& io, uint16_t port) : socket_(io) {
    socket_.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  }
  void write(const std::string& bytes) { boost::asio::write(socket_, boost::asio::buffer(bytes)); }
  // Reads until the server closes (true) or `timeout` passes (false); `received` collects it.
  bool wait_closed(Millis timeout, std::string& received) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      const auto left =
          std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{socket_.native_handle(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      const ssize_t n = ::recv(socket_.native_handle(), buf, sizeof buf, 0);
      if (n <= 0) return true;
      received.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  tcp::socket socket_;
};

class RobustnessTest : public ::testing::Test {
 protected:
  ServerThread server_;
  boost::asio::io_context io_;
};

// A socket bound to a port nobody listens on and connected to that same port connects to
// itself (TCP simultaneous open): what a reconnecting agent on the server's address can meet
// while a restarted daemon is not up yet. The connector must see it, or it holds the port.
TEST(SelfConnectTest, ASocketConnectedToItselfIsRecognised) {
  boost::asio::io_context io;
  tcp::socket self(io, tcp::v4());
  self.bind({boost::asio::ip::make_address("127.0.0.1"), 0});
  const tcp::endpoint own = self.local_endpoint();
  boost::system::error_code ec;
  self.connect(own, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(connected_to_itself(self));

  tcp::acceptor listener(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket client(io, tcp::v4());
  client.connect(listener.local_endpoint());
  EXPECT_FALSE(connected_to_itself(client));
  tcp::socket unconnected(io, tcp::v4());
  EXPECT_FALSE(connected_to_itself(unconnected));
}

TEST_F(RobustnessTest, BadConnectionsAreDroppedWithoutDisturbingARunningJob) {
  auto a = start_node(io_, node_options(server_.port(), "job", 0));
  auto b = start_node(io_, node_options(server_.port(), "job", 1));
  ASSERT_TRUE(run_until(io_, [&] { return a->connected && b->connected; }));
  start_join(*a, join_request("a", 2, 2));
  start_join(*b, join_request("b", 2, 2));
  ASSERT_TRUE(run_until(io_, [&] { return a->assignment && b->assignment; }));

  boost::asio::io_context raw_io;
  RawPeer garbage(raw_io, server_.port()), oversized(raw_io, server_.port()),
      half(raw_io, server_.port()), silent(raw_io, server_.port()),
      wrong_version(raw_io, server_.port());
  garbage.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  oversized.write(std::string("\x01\x00\x00\x01\x01", 5));  // 16 MiB + 1 frame
  const std::string hello =
      encode_frame(ClientMessage(Hello{kProtocolMagic, kProtocolVersion, "job"}));
  half.write(hello.substr(0, hello.size() / 2));
  wrong_version.write(encode_frame(ClientMessage(Hello{kProtocolMagic, 99, "job"})));

  // The raw peers wait on their own thread while this one keeps the members heartbeating.
  std::string got, refused;
  std::atomic<int> closed{0};
  std::thread checker([&] {
    for (RawPeer* peer : {&garbage, &oversized, &half, &silent}) {
      closed += peer->wait_closed(3s, got);  // handshake_timeout is 300 ms
    }
    closed += wrong_version.wait_closed(3s, refused);
    closed += 100;  // done
  });
  run_until(
      io_, [&] { return closed >= 100; }, 20s);
  checker.join();
  EXPECT_EQ(closed, 105);
  EXPECT_NE(got.find("exceeds the limit"), std::string::npos);
  EXPECT_NE(refused.find("protocol version 99 is not supported"), std::string::npos);

  a->client->report_success();
  b->client->report_success();
  ASSERT_TRUE(run_until(io_, [&] { return a->count<JobSucceeded>() && b->count<JobSucceeded>(); }));
  EXPECT_EQ(a->count<RestartRequested>() + b->count<RestartRequested>(), 0u);
  EXPECT_TRUE(run_until(io_, [&] { return server_.stats().connections == 2; }));
}

// A TCP relay between a client and the server that the test can cut, to simulate a blip, and
// that can swallow what the server sends first: frames written to a connection that is then
// cut, which the server believes sent.
class Relay {
 public:
  Relay(boost::asio::io_context& io, uint16_t target) : io_(io), acceptor_(io), target_(target) {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen();
    accept();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  void cut() {
    for (auto& s : sockets_) {
      boost::system::error_code ignored;
      s->close(ignored);
    }
    sockets_.clear();
    swallow_ = false;
  }
  // From now until cut(), bytes from the server are read and dropped.
  void swallow_from_server() { swallow_ = true; }
  size_t swallowed() const { return swallowed_; }

 private:
  void accept() {
    auto in = std::make_shared<tcp::socket>(io_);
    acceptor_.async_accept(*in, [this, in](boost::system::error_code ec) {
      if (ec) return;
      auto out = std::make_shared<tcp::socket>(io_);
      out->connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), target_), ec);
      if (ec) return;
      sockets_.push_back(in);
      sockets_.push_back(out);
      pump(in, out, false);
      pump(out, in, true);
      accept();
    });
  }
  void pump(std::shared_ptr<tcp::socket> from, std::shared_ptr<tcp::socket> to, bool to_client) {
    auto buf = std::make_shared<std::array<char, 4096>>();
    from->async_read_some(boost::asio::buffer(*buf),
                          [this, from, to, buf, to_client](boost::system::error_code ec, size_t n) {
                            if (ec) return;
                            if (to_client && swallow_) {
                              swallowed_ += n;
                              return pump(from, to, to_client);
                            }
                            boost::asio::async_write(*to, boost::asio::buffer(*buf, n),
                                                     [this, from, to, buf, to_client](
                                                         boost::system::error_code ec2, size_t) {
                                                       if (!ec2) pump(from, to, to_client);
                                                     });
                          });
  }
  boost::asio::io_context& io_;
  tcp::acceptor acceptor_;
  uint16_t target_;
  std::vector<std::shared_ptr<tcp::socket>> sockets_;
  bool swallow_ = false;
  size_t swallowed_ = 0;
};

TEST_F(RobustnessTest, ReconnectWithinHeartbeatTimeoutKeepsMembershipAndRank) {
  Relay relay(io_, server_.port());
  auto a = start_node(io_, node_options(relay.port(), "job", 0));
  auto b = start_node(io_, node_options(server_.port(), "job", 1));
  ASSERT_TRUE(run_until(io_, [&] { return a->connected && b->connected; }));
  start_join(*a, join_request("a", 2, 2));
  start_join(*b, join_request("b", 2, 2));
  ASSERT_TRUE(run_until(io_, [&] { return a->assignment && b->assignment; }));
  const uint32_t rank_of_a = (*a->assignment)->group_rank;
  relay.cut();  // a's connection dies: b's workers must not wait for it
  ASSERT_TRUE(run_until(io_, [&] { return b->count<RestartRequested>() == 1; }));
  // a reconnects through the relay within heartbeat_timeout, resumes, and is told too.
  ASSERT_TRUE(run_until(io_, [&] { return a->count<RestartRequested>() == 1; }));
  EXPECT_EQ(a->count<ConnectionLost>(), 0u);
  EXPECT_TRUE(a->client->connected());
  start_join(*b, join_request("b", 2, 2));
  start_join(*a, join_request("a", 2, 2));
  ASSERT_TRUE(run_until(io_, [&] { return a->assignment && b->assignment; }));
  ASSERT_TRUE(a->assignment->ok()) << a->assignment->error_message();
  EXPECT_EQ((*a->assignment)->group_rank, rank_of_a);  // membership and rank kept
  EXPECT_EQ((*a->assignment)->restart_count, 0u);      // a lost connection is not a failure
  a->client->report_success();
  b->client->report_success();
  ASSERT_TRUE(run_until(io_, [&] { return a->count<JobSucceeded>() && b->count<JobSucceeded>(); }));
}

// The server wrote a push (a's RestartRequested) to a connection that was then cut: it must
// not count it as delivered. a resumes with the count it received and gets it replayed.
TEST_F(RobustnessTest, APushLostWithACutConnectionIsReplayedOnResume) {
  Relay relay(io_, server_.port());
  auto a = start_node(io_, node_options(relay.port(), "job", 0));
  auto b = start_node(io_, node_options(server_.port(), "job", 1));
  ASSERT_TRUE(run_until(io_, [&] { return a->connected && b->connected; }));
  start_join(*a, join_request("a", 2, 2, 1));
  start_join(*b, join_request("b", 2, 2, 1));
  ASSERT_TRUE(run_until(io_, [&] { return a->assignment && b->assignment; }));

  relay.swallow_from_server();
  b->client->report_worker_failure("{}", 3);
  ASSERT_TRUE(
      run_until(io_, [&] { return b->count<RestartRequested>() == 1 && relay.swallowed() > 0; }));
  EXPECT_EQ(a->count<RestartRequested>(), 0u);  // it went into the void
  relay.cut();
  ASSERT_TRUE(run_until(io_, [&] { return a->count<RestartRequested>() == 1; }));
  EXPECT_EQ(a->last<RestartRequested>()->reason, RestartReason::kWorkerFailure);
  EXPECT_EQ(a->count<ConnectionLost>(), 0u);

  start_join(*a, join_request("a", 2, 2, 1));
  start_join(*b, join_request("b", 2, 2, 1));
  ASSERT_TRUE(run_until(io_, [&] { return a->assignment && b->assignment; }));
  ASSERT_TRUE(a->assignment->ok()) << a->assignment->error_message();
  EXPECT_EQ((*a->assignment)->restart_count, 1u);
  EXPECT_EQ(a->count<RestartRequested>(), 1u);  // replayed once, not twice
}

// a's failure report was done, but its answer (and the restart it caused) were lost with the
// connection: after the resume the report is sent again, answered ok and not counted twice.
TEST_F(RobustnessTest, ARequestWhoseAnswerALostConnectionTookIsAnsweredOnceAfterResume) {
  Relay relay(io_, server_.port());
  auto a = start_node(io_, node_options(relay.port(), "job", 0));
  auto b = start_node(io_, node_options(server_.port(), "job", 1));
  ASSERT_TRUE(run_until(io_, [&] { return a->connected && b->connected; }));
  start_join(*a, join_request("a", 2, 2, 2));
  start_join(*b, join_request("b", 2, 2, 2));
  ASSERT_TRUE(run_until(io_, [&] { return a->assignment && b->assignment; }));

  relay.swallow_from_server();
  std::optional<Status> reported;
  a->client->report_worker_failure("{\"node\":\"a\"}", 3, [&](Status s) { reported = s; });
  ASSERT_TRUE(
      run_until(io_, [&] { return b->count<RestartRequested>() == 1 && relay.swallowed() > 0; }));
  relay.cut();
  ASSERT_TRUE(run_until(io_, [&] { return reported && a->count<RestartRequested>() == 1; }));
  EXPECT_TRUE(reported->ok()) << reported->message();
  EXPECT_EQ(a->count<ConnectionLost>(), 0u);

  start_join(*a, join_request("a", 2, 2, 2));
  start_join(*b, join_request("b", 2, 2, 2));
  ASSERT_TRUE(run_until(io_, [&] { return a->assignment && b->assignment; }));
  ASSERT_TRUE(b->assignment->ok()) << b->assignment->error_message();
  EXPECT_EQ((*b->assignment)->restart_count, 1u);  // one failure, one restart
  EXPECT_EQ(b->count<RestartRequested>(), 1u);
}

// The answer to a's first join (its membership token) was lost: it has nothing to resume with.
// It sends the join again; the server recognises it and a keeps its place, with no restart.
TEST_F(RobustnessTest, AFirstJoinWhoseAnswerWasLostIsSentAgainAndKeepsItsPlace) {
  Relay relay(io_, server_.port());
  auto a = start_node(io_, node_options(relay.port(), "job", 0));
  auto b = start_node(io_, node_options(server_.port(), "job", 1));
  ASSERT_TRUE(run_until(io_, [&] { return a->connected && b->connected; }));
  relay.swallow_from_server();
  start_join(*a, join_request("a", 2, 2));
  auto a_joined = [&] {
    return server_.on_loop([](RendezvousServer& s) {
      for (const auto& job : s.jobs()) {
        if (!job.round) continue;
        for (const auto& node : job.round->nodes) {
          if (node.node_id == "a") return true;
        }
      }
      return false;
    });
  };
  ASSERT_TRUE(run_until(io_, a_joined));  // done: its answer is on the way into the void
  relay.cut();
  // Until a is back, b's join must not close a round without it or restart one.
  start_join(*b, join_request("b", 2, 2));
  ASSERT_TRUE(run_until(io_, [&] { return a->assignment && b->assignment; }));
  ASSERT_TRUE(a->assignment->ok()) << a->assignment->error_message();
  ASSERT_TRUE(b->assignment->ok()) << b->assignment->error_message();
  EXPECT_EQ((*a->assignment)->round, (*b->assignment)->round);
  EXPECT_EQ((*a->assignment)->group_world_size, 2u);
  EXPECT_NE((*a->assignment)->group_rank, (*b->assignment)->group_rank);
  EXPECT_EQ(a->count<RestartRequested>() + b->count<RestartRequested>(), 0u);
  EXPECT_EQ(a->count<ConnectionLost>(), 0u);
}

TEST_F(RobustnessTest, ServerShutdownIsReportedAsConnectionLost) {
  auto a = start_node(io_, node_options(server_.port(), "job", 0));
  ASSERT_TRUE(run_until(io_, [&] { return a->connected.has_value(); }));
  start_join(*a, join_request("a", 2, 2));
  server_.stop();
  ASSERT_TRUE(run_until(
      io_, [&] { return a->count<ConnectionLost>() && a->assignment; }, 5s));
  EXPECT_FALSE(a->assignment->ok());
}

// A stuck server: it completes the handshake, then reads and never answers anything.
class MuteServer {
 public:
  explicit MuteServer(boost::asio::io_context& io) : acceptor_(io), peer_(io) {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen();
    acceptor_.async_accept(peer_, [this](boost::system::error_code ec) {
      if (ec) return;
      ack_ = encode_frame(ServerMessage(HelloAck{}));
      boost::asio::async_write(peer_, boost::asio::buffer(ack_),
                               [this](boost::system::error_code, size_t) { discard(); });
    });
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  void discard() {
    peer_.async_read_some(boost::asio::buffer(sink_), [this](boost::system::error_code ec, size_t) {
      if (!ec) discard();
    });
  }
  tcp::acceptor acceptor_;
  tcp::socket peer_;
  std::string ack_;
  std::array<char, 4096> sink_{};
};

TEST_F(RobustnessTest, ARequestTheServerNeverAnswersFailsAfterRequestTimeout) {
  MuteServer mute(io_);
  ClientOptions options = node_options(mute.port(), "job", 0);
  options.keep_alive_interval = 1s;  // the silence check must not end the connection first
  options.heartbeat_timeout = 8s;
  options.request_timeout = 100ms;
  auto a = start_node(io_, options);
  ASSERT_TRUE(run_until(io_, [&] { return a->connected.has_value(); }));
  ASSERT_TRUE(a->connected->ok()) << a->connected->message();

  std::optional<Status> reported;
  a->client->report_success([&](Status s) { reported = s; });
  start_join(*a, join_request("node-0", 1, 1));
  ASSERT_TRUE(run_until(
      io_, [&] { return reported && a->assignment; }, 5s));

  ASSERT_FALSE(reported->ok());
  EXPECT_NE(reported->message().find("did not answer the success report within 100 ms"),
            std::string::npos)
      << reported->message();
  ASSERT_FALSE(a->assignment->ok());
  EXPECT_NE(a->assignment->error_message().find("did not answer join within 100 ms"),
            std::string::npos)
      << a->assignment->error_message();
  EXPECT_TRUE(a->client->connected());  // a slow answer is not a lost connection
  EXPECT_EQ(a->count<ConnectionLost>(), 0u);
}

}  // namespace
}  // namespace ddprun::rdzv::testing
