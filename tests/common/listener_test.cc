// The common Listener with a trivial connection type, on one io_context run by the test thread
// (run_for / run_one with deadlines): connection limits in total and per source address (a
// client bound to 127.0.0.2 stands for another host), refusals handed over within the slack,
// the two stages of shutdown, shedding when out of descriptors, and listen errors.
#include "common/listener.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/ip/tcp.hpp>

#include "tests/support/descriptor_exhaustion.h"
#include "tests/support/run_until.h"

namespace ddprun {
namespace {

using namespace std::chrono_literals;
using tcp = boost::asio::ip::tcp;
using testing::DescriptorExhaustion;
using testing::most_resting_accepts;
using testing::run_until;

// Holds its socket; on close_gracefully it ends only when `obliging`, else it waits for
// close_now (a peer that does not hang up).
class HeldConnection final : public ServedConnection {
 public:
  HeldConnection(Listener::Accepted a, bool obliging)
      : socket_(std::move(a.socket)),
        source(a.source),
        refusal_(a.refusal),
        ended_(std::move(a.ended)),
        obliging_(obliging) {}
  void start() override { started = true; }
  void close_gracefully(const std::string& reason) override {
    graceful_reason = reason;
    if (obliging_) close_now();
  }
  void close_now() override {
    if (!socket_.is_open()) return;
    boost::system::error_code ignored;
    socket_.close(ignored);
    // Ends later, on the loop, as a real connection's coroutine would.
    boost::asio::post(socket_.get_executor(), [ended = std::move(ended_)] {
      if (ended) ended();
    });
  }
  std::optional<Refusal> refusal() const { return refusal_; }
  int descriptor() { return socket_.native_handle(); }

  boost::asio::ip::address source;
  bool started = false;
  std::string graceful_reason;

 private:
  tcp::socket socket_;
  std::optional<Refusal> refusal_;
  std::function<void()> ended_;
  bool obliging_;
};

// The socket inodes this process holds (/proc/self/fd links "socket:[INODE]").
std::set<std::string> own_socket_inodes() {
  std::set<std::string> inodes;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) {
      inodes.insert(target.substr(8, target.size() - 9));
    }
  }
  return inodes;
}

// The accept-queue length of each socket of this process listening on 127.0.0.1:`port`, as
// /proc/net/tcp shows it (for a listening socket, rx_queue is the number of connections waiting
// to be accepted). One entry per listening socket.
std::vector<uint32_t> accept_queues_of_this_process(uint16_t port) {
  const std::set<std::string> own = own_socket_inodes();
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the header
  char local[32];
  std::snprintf(local, sizeof local, "0100007F:%04X", port);
  std::vector<uint32_t> queues;
  while (std::getline(table, line)) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
    std::istringstream fields(line);
    std::string sl, address, remote, state, queue, timer, retransmits, uid, timeout, inode;
    fields >> sl >> address >> remote >> state >> queue >> timer >> retransmits >> uid >> timeout >>
        inode;
    if (address != local || state != "0A" || own.count(inode) == 0) continue;  // 0A: LISTEN
    queues.push_back(
        static_cast<uint32_t>(std::stoul(queue.substr(queue.find(':') + 1), nullptr, 16)));
  }
  return queues;
}

class ListenerTest : public ::testing::Test {
 protected:
  Listener::MakeConnection make(bool obliging = true) {
    return [this, obliging](Listener::Accepted a) {
      auto c = std::make_shared<HeldConnection>(std::move(a), obliging);
      made.push_back(c);
      return c;
    };
  }

  // A client connected from `from` (127.0.0.N) to the listener's port.
  std::unique_ptr<tcp::socket> connect_from(const Listener& listener,
                                            const std::string& from = "127.0.0.1") {
    auto s = std::make_unique<tcp::socket>(io, tcp::v4());
    s->bind({boost::asio::ip::make_address(from), 0});
    s->connect({boost::asio::ip::make_address("127.0.0.1"), listener.port()});
    return s;
  }

  // True when the peer has closed `s` (end of file or reset), waiting at most 10 s.
  bool closed_by_peer(tcp::socket& s) {
    timeval tv{10, 0};
    ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char byte = 0;
    const ssize_t n = ::recv(s.native_handle(), &byte, 1, 0);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

  boost::asio::io_context io;
  std::vector<std::shared_ptr<HeldConnection>> made;
};

TEST_F(ListenerTest, OverTheTotalLimitAConnectionIsClosedAndCounted) {
  ListenerOptions options;
  options.name = "test server";
  options.max_connections = 2;
  Listener listener(io, options);
  ASSERT_TRUE(listener.listen("127.0.0.1", 0, make()).ok());
  auto a = connect_from(listener);
  auto b = connect_from(listener);
  ASSERT_TRUE(run_until(io, [&] { return listener.connections() == 2; }));
  auto c = connect_from(listener);
  ASSERT_TRUE(run_until(io, [&] { return listener.counters().refused_total() == 1; }));
  EXPECT_EQ(listener.counters().refused[static_cast<size_t>(Refusal::kConnections)], 1u);
  EXPECT_EQ(listener.counters().accepted, 2u);
  EXPECT_EQ(made.size(), 2u) << "no slack: the server never sees the refused one";
  EXPECT_TRUE(closed_by_peer(*c));
  // Room again once one ends.
  made[0]->close_now();
  ASSERT_TRUE(run_until(io, [&] { return listener.connections() == 1; }));
  auto d = connect_from(listener);
  ASSERT_TRUE(run_until(io, [&] { return listener.connections() == 2; }));
  EXPECT_TRUE(made.back()->started);
}

int socket_option(int fd, int level, int name) {
  int value = -1;
  socklen_t length = sizeof value;
  EXPECT_EQ(::getsockopt(fd, level, name, &value, &length), 0) << "descriptor " << fd;
  return value;
}

// Accepted sockets are close-on-exec, name their source from the accept itself, and carry the
// options asked for (set on the listening socket, which Linux copies): none unasked.
TEST_F(ListenerTest, AcceptedSocketsAreCloseOnExecAndCarryTheOptionsAskedFor) {
  for (const bool asked : {true, false}) {
    SCOPED_TRACE(asked ? "options asked for" : "no options asked for");
    ListenerOptions options;
    options.acceptors = 2;
    options.accepted_no_delay = asked;
    options.accepted_keep_alive = asked;
    Listener listener(io, options);
    made.clear();
    ASSERT_TRUE(listener.listen("127.0.0.1", 0, make()).ok());
    std::vector<std::unique_ptr<tcp::socket>> clients;
    for (int i = 0; i < 6; ++i) clients.push_back(connect_from(listener, "127.0.0.3"));
    ASSERT_TRUE(run_until(io, [&] { return listener.connections() == clients.size(); }));
    for (const auto& connection : made) {
      const int fd = connection->descriptor();
      EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC) << "descriptor " << fd;
      EXPECT_EQ(socket_option(fd, IPPROTO_TCP, TCP_NODELAY) != 0, asked);
      EXPECT_EQ(socket_option(fd, SOL_SOCKET, SO_KEEPALIVE) != 0, asked);
      EXPECT_EQ(connection->source.to_string(), "127.0.0.3");
    }
  }
}

TEST_F(ListenerTest, PerSourceLimitCountsEachAddressApart) {
  ListenerOptions options;
  options.max_connections_per_source = 1;
  options.refusal_slack = 4;  // refusals are handed over to be answered
  Listener listener(io, options);
  ASSERT_TRUE(listener.listen("127.0.0.1", 0, make()).ok());
  auto first = connect_from(listener, "127.0.0.1");
  auto other_host = connect_from(listener, "127.0.0.2");
  ASSERT_TRUE(run_until(io, [&] { return made.size() == 2; }));
  EXPECT_FALSE(made[0]->refusal());
  EXPECT_FALSE(made[1]->refusal()) << "another address has its own count";
  auto second = connect_from(listener, "127.0.0.1");
  ASSERT_TRUE(run_until(io, [&] { return made.size() == 3; }));
  ASSERT_TRUE(made[2]->refusal());
  EXPECT_EQ(*made[2]->refusal(), Refusal::kConnectionsPerSource);
  EXPECT_EQ(listener.counters().refused[static_cast<size_t>(Refusal::kConnectionsPerSource)], 1u);
  // When the refused one and the first end, 127.0.0.1 may connect again.
  made[2]->close_now();
  made[0]->close_now();
  ASSERT_TRUE(run_until(io, [&] { return listener.connections() == 1; }));
  auto third = connect_from(listener, "127.0.0.1");
  ASSERT_TRUE(run_until(io, [&] { return made.size() == 4; }));
  EXPECT_FALSE(made[3]->refusal());
}

TEST_F(ListenerTest, ShutdownAsksFirstThenClosesTheRestAfterTheGrace) {
  ListenerOptions options;
  options.shutdown_grace = 200ms;
  Listener listener(io, options);
  ASSERT_TRUE(listener.listen("127.0.0.1", 0, make(/*obliging=*/false)).ok());
  auto a = connect_from(listener);
  ASSERT_TRUE(run_until(io, [&] { return listener.connections() == 1; }));
  bool done = false;
  listener.shutdown("going away", [&] { done = true; });
  EXPECT_TRUE(listener.stopping());
  EXPECT_EQ(made[0]->graceful_reason, "going away");
  EXPECT_FALSE(done) << "the connection did not hang up: stage two has not come yet";
  ASSERT_TRUE(run_until(io, [&] { return done; })) << "stage two never closed it";
  EXPECT_EQ(listener.connections(), 0u);
  EXPECT_TRUE(closed_by_peer(*a));
  bool second = false;
  listener.shutdown("again", [&] { second = true; });
  EXPECT_TRUE(second) << "a second call is not kept waiting";
}

TEST_F(ListenerTest, ShutdownEndsAsSoonAsEveryConnectionHasHungUp) {
  ListenerOptions options;
  options.shutdown_grace = std::chrono::minutes(10);  // far beyond run_until's 10 s bound
  Listener listener(io, options);
  ASSERT_TRUE(listener.listen("127.0.0.1", 0, make(/*obliging=*/true)).ok());
  auto a = connect_from(listener);
  auto b = connect_from(listener);
  ASSERT_TRUE(run_until(io, [&] { return listener.connections() == 2; }));
  bool done = false;
  listener.shutdown("bye", [&] { done = true; });
  // Only connections that hung up in stage one can end it within the bound.
  ASSERT_TRUE(run_until(io, [&] { return done; })) << "waited for the grace";
  EXPECT_EQ(listener.connections(), 0u);
}

// Out of descriptors: newcomers are accepted with the spare descriptor, get the goodbye and
// are closed, one per rest of the loop: the loop is mostly off the CPU while they queue.
TEST_F(ListenerTest, OutOfDescriptorsItShedsWithAGoodbyeWithoutSpinning) {
  Listener listener(io, ListenerOptions{});
  int goodbyes = 0;
  ASSERT_TRUE(listener
                  .listen("127.0.0.1", 0, make(),
                          [&](tcp::socket& s) {
                            ++goodbyes;
                            boost::system::error_code ec;
                            s.write_some(boost::asio::buffer(std::string("full\n")), ec);
                          })
                  .ok());
  std::vector<std::unique_ptr<tcp::socket>> newcomers;
  for (int i = 0; i < 5; ++i) newcomers.push_back(std::make_unique<tcp::socket>(io, tcp::v4()));
  {
    DescriptorExhaustion full;
    ASSERT_TRUE(full.full());
    for (auto& s : newcomers) {
      s->connect({boost::asio::ip::make_address("127.0.0.1"), listener.port()});
    }
    const auto started = std::chrono::steady_clock::now();
    const bool all_shed = run_until(io, [&] { return goodbyes == 5; });
    const uint64_t tried = listener.counters().out_of_descriptor_accepts;
    const auto wall = std::chrono::steady_clock::now() - started;
    RecordProperty("accepts_while_out_of_descriptors", std::to_string(tried));
    // Between sheds the loop rests: a loop that retried accept at once would have tried
    // thousands of times.
    EXPECT_GE(tried, 5u);
    EXPECT_LE(tried, most_resting_accepts(wall, Listener::kDescriptorPause, 1))
        << "accepts tried in " << std::chrono::duration_cast<Millis>(wall).count() << " ms";
    ASSERT_TRUE(all_shed) << goodbyes << " of 5 newcomers got the goodbye";
    EXPECT_EQ(listener.connections(), 0u);
  }
  EXPECT_EQ(listener.counters().refused[static_cast<size_t>(Refusal::kDescriptors)], 5u);
  char text[8] = {};
  EXPECT_EQ(::recv(newcomers[0]->native_handle(), text, sizeof text, 0), 5);
  EXPECT_EQ(std::string(text, 5), "full\n");
  auto after = connect_from(listener);
  ASSERT_TRUE(run_until(io, [&] { return listener.connections() == 1; }));
}

// Several sockets on one port (SO_REUSEPORT, ListenerOptions::acceptors): the port really has
// four listening sockets of this process, the kernel spreads connections over their queues,
// every connection is served whichever queue it waited in, and a second listener asking for
// the same port is refused as with one socket, not let into the group.
TEST_F(ListenerTest, SeveralAcceptorsServeOnePortWhichNoOtherListenerCanJoin) {
  ListenerOptions options;
  options.name = "test server";
  options.acceptors = 4;
  Listener listener(io, options);
  ASSERT_TRUE(listener.listen("127.0.0.1", 0, make()).ok());
  // The loop does not run yet: the kernel completes each connection into the accept queue of
  // the socket it picked, and /proc/net/tcp shows every queue's length.
  std::vector<std::unique_ptr<tcp::socket>> clients;
  for (int i = 0; i < 64; ++i) clients.push_back(connect_from(listener));
  const std::vector<uint32_t> queued = accept_queues_of_this_process(listener.port());
  ASSERT_EQ(queued.size(), 4u) << "listening sockets of this process on the port";
  EXPECT_EQ(std::accumulate(queued.begin(), queued.end(), 0u), 64u);
  EXPECT_GE(std::count_if(queued.begin(), queued.end(), [](uint32_t n) { return n > 0; }), 2)
      << "every connection waited in one socket's queue";
  // Each queue is drained, not only the first socket's.
  ASSERT_TRUE(run_until(io, [&] { return listener.connections() == 64; }));
  EXPECT_EQ(listener.counters().accepted, 64u);
  for (uint32_t left : accept_queues_of_this_process(listener.port())) EXPECT_EQ(left, 0u);

  Listener again(io, options);
  const Status busy = again.listen("127.0.0.1", listener.port(), make());
  ASSERT_FALSE(busy.ok()) << "a second group on the port would share its clients";
  EXPECT_NE(busy.message().find("test server: bind 127.0.0.1:"), std::string::npos)
      << busy.message();
  // A fixed free port works too; closing frees it for the next listener.
  const uint16_t port = listener.port();
  listener.close();
  clients.clear();
  ASSERT_TRUE(run_until(io, [&] { return listener.connections() == 0; }));
  Listener next(io, options);
  ASSERT_TRUE(next.listen("127.0.0.1", port, make()).ok());
  auto late = connect_from(next);
  ASSERT_TRUE(run_until(io, [&] { return next.connections() == 1; }));
}

TEST_F(ListenerTest, ListenErrorsNameTheServerAndTheStep) {
  ListenerOptions options;
  options.name = "test server";
  Listener first(io, options);
  ASSERT_TRUE(first.listen("127.0.0.1", 0, make()).ok());
  Listener second(io, options);
  const Status busy = second.listen("127.0.0.1", first.port(), make());
  ASSERT_FALSE(busy.ok());
  EXPECT_NE(busy.message().find("test server: bind 127.0.0.1:"), std::string::npos)
      << busy.message();
  // A 64-character label: the resolver refuses it before sending any query.
  const std::string unresolvable = std::string(64, 'a') + ".test";
  const Status unknown = second.listen(unresolvable, 0, make());
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(unknown.is_invalid_argument());
  EXPECT_NE(unknown.message().find("test server: cannot resolve '" + unresolvable + "'"),
            std::string::npos)
      << unknown.message();
  EXPECT_FALSE(first.listen("127.0.0.1", 0, make()).ok()) << "already listening";
}

}  // namespace
}  // namespace ddprun
