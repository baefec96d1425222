// The store server in-process on port 0 with real loopback clients of both dialects: every
// query type, many concurrent clients meeting at barriers, bad clients that must not disturb
// the others, disconnects in the middle of a wait, limits, close() and adopt().
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>

#include "tests/store/init_traffic.h"
#include "tests/store/store_test_util.h"
#include "tests/support/descriptor_exhaustion.h"

namespace ddprun::store::testing {
namespace {

TEST(StoreServerTest, LegacyClientEveryQuery) {
  StoreThread store;
  auto c = TestClient::connect(store.port(), Dialect::kLegacy);
  ASSERT_TRUE(c);
  c->set("/k", "v1");
  EXPECT_EQ(c->get("/k"), "v1");
  EXPECT_EQ(c->add("/n", 5), 5);
  EXPECT_EQ(c->add("/n", -2), 3);
  EXPECT_EQ(c->compare_set("/k", "v1", "v2"), "v2");
  EXPECT_EQ(c->compare_set("/absent", "x", "y"), "x");
  EXPECT_EQ(c->num_keys(), 2);
  c->send(make(Op::kCheck, {"/k", "/n"}));
  EXPECT_EQ(c->read_u8(), static_cast<uint8_t>(CheckReply::kReady));
  c->send(make(Op::kCheck, {"/k", "/absent"}));
  EXPECT_EQ(c->read_u8(), static_cast<uint8_t>(CheckReply::kNotReady));
  EXPECT_TRUE(c->wait({"/k", "/n"}));
  // torch 2.0's additions to the legacy numbering.
  c->send(make(Op::kAppend, {"/k"}, {"+"}));
  c->send(make(Op::kMultiSet, {"/a", "/b"}, {"A", "B"}));
  c->send(make(Op::kMultiGet, {"/k", "/a", "/b", "/none"}));
  EXPECT_EQ(c->read_value(), "v2+");
  EXPECT_EQ(c->read_value(), "A");
  EXPECT_EQ(c->read_value(), "B");
  EXPECT_EQ(c->read_value(), "");
  c->send(make(Op::kDeleteKey, {"/a"}));
  EXPECT_EQ(c->read_i64(), 1);
  c->send(make(Op::kDeleteKey, {"/a"}));
  EXPECT_EQ(c->read_i64(), 0);
  const StoreStats s = store.stats();
  EXPECT_EQ(s.connections_legacy, 1u);
  EXPECT_EQ(s.connections_validated, 0u);
  EXPECT_EQ(s.ops(Op::kAdd), 2u);
  EXPECT_EQ(s.ops(Op::kDeleteKey), 2u);
  EXPECT_EQ(s.keys, 3u);  // /k /n /b
}

TEST(StoreServerTest, ValidatedClientHandshakePingQueuesAndCancel) {
  StoreThread store;
  auto c = TestClient::connect(store.port(), Dialect::kValidated);
  ASSERT_TRUE(c);
  Request ping = make(Op::kPing);
  ping.number = 4242;
  c->send(ping);
  auto echoed = c->read_exact(4);
  ASSERT_TRUE(echoed);
  EXPECT_EQ(*echoed, std::string("\x92\x10\x00\x00", 4));
  c->set("/k", "v");
  EXPECT_EQ(c->get("/k"), "v");
  c->send(make(Op::kQueuePush, {"/q"}, {"first"}));
  c->send(make(Op::kQueuePush, {"/q"}, {"second"}));
  c->send(make(Op::kQueueLen, {"/q"}));
  EXPECT_EQ(c->read_i64(), 2);
  c->send(make(Op::kQueuePop, {"/q"}));
  EXPECT_EQ(c->read_i64(), 2);
  EXPECT_EQ(c->read_value(), "first");
  // torch 2.x's timed-out wait: WAIT, no answer, CANCEL_WAIT, then WAIT_CANCELED.
  c->send(make(Op::kWait, {"/never"}));
  c->send(make(Op::kCancelWait));
  EXPECT_EQ(c->read_u8(), static_cast<uint8_t>(WaitReply::kWaitCanceled));
  EXPECT_EQ(c->num_keys(), 1);  // queues are not keys; and no stray byte came first
  EXPECT_EQ(store.stats().connections_validated, 1u);
  EXPECT_EQ(store.stats().pending_waits, 0u);
}

// The race torch 2.x's client handles: the key arrives after its timeout but before its
// CANCEL_WAIT, so STOP_WAITING precedes WAIT_CANCELED.
TEST(StoreServerTest, ValidatedCancelAfterWakeGetsBothReplies) {
  StoreThread store;
  auto waiter = TestClient::connect(store.port(), Dialect::kValidated);
  auto setter = TestClient::connect(store.port(), Dialect::kValidated);
  ASSERT_TRUE(waiter && setter);
  waiter->send(make(Op::kWait, {"/late"}));
  ASSERT_TRUE(store.stats_until([](const StoreStats& s) { return s.pending_waits == 1; }));
  setter->set("/late", "x");
  EXPECT_EQ(waiter->read_u8(), static_cast<uint8_t>(WaitReply::kStopWaiting));
  waiter->send(make(Op::kCancelWait));
  EXPECT_EQ(waiter->read_u8(), static_cast<uint8_t>(WaitReply::kWaitCanceled));
}

// torch 1.13 times out a wait on its side and says nothing; its next query must get its own
// reply, not a late STOP_WAITING (torch 1.13's own server sends one).
TEST(StoreServerTest, LegacyTimedOutWaitIsDroppedOnTheNextQuery) {
  StoreThread store;
  auto waiter = TestClient::connect(store.port(), Dialect::kLegacy);
  auto setter = TestClient::connect(store.port(), Dialect::kLegacy);
  ASSERT_TRUE(waiter && setter);
  setter->set("/x", "value");
  EXPECT_EQ(setter->num_keys(), 1);          // the set has been applied
  waiter->send(make(Op::kWait, {"/late"}));  // the client "times out" here
  EXPECT_EQ(waiter->num_keys(), 1);
  setter->set("/late", "now");
  EXPECT_EQ(setter->num_keys(), 2);  // applied: a late STOP_WAITING would be on its way now
  EXPECT_EQ(waiter->get("/x"), "value");
  EXPECT_EQ(waiter->num_keys(), 2);
}

TEST(StoreServerTest, LegacyWatchKeyPushesChanges) {
  StoreThread store;
  auto watcher = TestClient::connect(store.port(), Dialect::kLegacy);  // the callback socket
  auto writer = TestClient::connect(store.port(), Dialect::kLegacy);
  ASSERT_TRUE(watcher && writer);
  watcher->send(make(Op::kWatchKey, {"/w"}));
  EXPECT_EQ(watcher->read_u8(), static_cast<uint8_t>(WatchKind::kRegistered));
  writer->set("/w", "one");
  writer->set("/w", "two");
  writer->send(make(Op::kDeleteKey, {"/w"}));
  EXPECT_EQ(writer->read_i64(), 1);
  const std::string expected = encode_watch_event({WatchKind::kCreated, "/w", "", "one"}) +
                               encode_watch_event({WatchKind::kUpdated, "/w", "one", "two"}) +
                               encode_watch_event({WatchKind::kDeleted, "/w", "two", ""});
  EXPECT_EQ(watcher->read_exact(expected.size()), expected);
}

// 64 clients, half of each dialect, meet at three barriers built from add + wait, the way
// c10d's store-based barriers work: the last to arrive opens the gate.
TEST(StoreServerTest, SixtyFourClientsMeetAtBarriers) {
  constexpr int kClients = 64;
  constexpr int kRounds = 3;
  StoreThread store;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = TestClient::connect(store.port(), i % 2 ? Dialect::kValidated : Dialect::kLegacy);
      if (!c) return ++failures, void();
      for (int round = 0; round < kRounds; ++round) {
        const std::string r = std::to_string(round);
        auto arrived = c->add("/arrived/" + r, 1);
        if (!arrived) return ++failures, void();
        if (*arrived == kClients) c->set("/gate/" + r, "open");
        if (!c->wait({"/gate/" + r})) return ++failures, void();
        if (c->get("/arrived/" + r) != std::to_string(kClients)) return ++failures, void();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const StoreStats s = store.stats();
  EXPECT_EQ(s.connections_accepted, static_cast<uint64_t>(kClients));
  EXPECT_EQ(s.connections_legacy + s.connections_validated, static_cast<uint64_t>(kClients));
  EXPECT_EQ(s.ops(Op::kAdd), static_cast<uint64_t>(kClients * kRounds));
  EXPECT_EQ(s.ops(Op::kWait), static_cast<uint64_t>(kClients * kRounds));
  EXPECT_EQ(s.ops(Op::kSet), static_cast<uint64_t>(kRounds));
  EXPECT_EQ(s.pending_waits, 0u);
}

// Garbage of several kinds closes that connection only; a client in the middle of a wait and
// another one doing ordinary work see nothing.
TEST(StoreServerTest, MalformedClientsDoNotDisturbOthers) {
  StoreThread store;
  auto waiter = TestClient::connect(store.port(), Dialect::kLegacy);
  auto worker = TestClient::connect(store.port(), Dialect::kValidated);
  ASSERT_TRUE(waiter && worker);
  waiter->send(make(Op::kWait, {"/gate"}));
  const std::vector<std::string> garbage = {
      std::string("\xee", 1),                                       // unknown legacy type
      std::string("\x00\xce\xf7\x85\x3c\x20", 6),                   // validated, type 0x20 unknown
      std::string("\x02\xff\xff\xff\xff\xff\xff\xff\x7f", 9),       // legacy GET, absurd key length
      std::string("\x00\xce\xf7\x85\x3c\x00\xce\xf7\x85\x3c", 10),  // VALIDATE twice
      std::string("\x00\xce\xf7\x85\x3c\x0d\x01\x00\x00\x00\x07", 11),  // good, then bad
  };
  for (size_t i = 0; i < garbage.size(); ++i) {
    SCOPED_TRACE(i);
    auto bad = TestClient::connect(store.port(), Dialect::kLegacy);
    ASSERT_TRUE(bad);
    bad->send_raw(garbage[i]);
    if (i == 4) {  // VALIDATE, PING 1 and NUM_KEYS are served before the bad byte comes
      EXPECT_EQ(bad->read_exact(4), std::string("\x01\x00\x00\x00", 4));
      EXPECT_EQ(bad->read_i64(), 0);
      bad->send_raw(std::string("\x13", 1));  // 19: no such query in 2.x (up to 2.15)
    }
    EXPECT_TRUE(bad->wait_closed());
  }
  EXPECT_EQ(worker->add("/count", 1), 1);
  worker->set("/gate", "open");
  EXPECT_EQ(waiter->read_u8(), static_cast<uint8_t>(WaitReply::kStopWaiting));
  EXPECT_EQ(store.stats().protocol_errors, garbage.size());
}

TEST(StoreServerTest, ClientThatDisconnectsMidWaitLeavesNoWaitBehind) {
  StoreThread store;
  auto other = TestClient::connect(store.port(), Dialect::kLegacy);
  ASSERT_TRUE(other);
  {
    auto gone = TestClient::connect(store.port(), Dialect::kValidated);
    ASSERT_TRUE(gone);
    gone->send(make(Op::kWait, {"/a", "/b"}));
    other->send(make(Op::kWait, {"/b"}));
    ASSERT_TRUE(store.stats_until([](const StoreStats& s) { return s.pending_waits == 2; }));
  }
  ASSERT_TRUE(store.stats_until(
      [](const StoreStats& s) { return s.pending_waits == 1 && s.connections_open == 1; }));
  auto setter = TestClient::connect(store.port(), Dialect::kLegacy);
  setter->set("/b", "1");
  EXPECT_EQ(other->read_u8(), static_cast<uint8_t>(WaitReply::kStopWaiting));
  EXPECT_EQ(store.stats().pending_waits, 0u);
}

TEST(StoreServerTest, LimitsCloseTheOffenderOnly) {
  StoreServerOptions options;
  options.limits.max_keys = 2;
  options.codec.max_value_bytes = 1024;
  options.max_outbox_bytes = 4096;
  StoreThread store(options);
  auto good = TestClient::connect(store.port(), Dialect::kLegacy);
  ASSERT_TRUE(good);
  good->set("/a", std::string(1000, 'x'));
  good->set("/b", std::string(1000, 'y'));
  EXPECT_EQ(good->num_keys(), 2);  // both applied before anyone else writes

  auto too_many = TestClient::connect(store.port(), Dialect::kLegacy);
  too_many->set("/c", "1");  // a third key
  EXPECT_TRUE(too_many->wait_closed());
  auto too_big = TestClient::connect(store.port(), Dialect::kValidated);
  too_big->set("/a", std::string(1025, 'z'));
  EXPECT_TRUE(too_big->wait_closed());
  auto hog = TestClient::connect(store.port(), Dialect::kLegacy);
  hog->send(make(Op::kMultiGet, {"/a", "/b", "/a", "/b", "/a"}));  // a 5 KiB reply
  EXPECT_TRUE(hog->wait_closed());

  EXPECT_EQ(good->get("/a"), std::string(1000, 'x'));
  EXPECT_EQ(good->num_keys(), 2);
  const StoreStats s = store.stats();
  EXPECT_EQ(s.limit_refusals, 1u);
  EXPECT_EQ(s.protocol_errors, 1u);
  EXPECT_EQ(s.slow_readers_dropped, 1u);
}

TEST(StoreServerTest, StalledPartialQueryIsDropped) {
  StoreServerOptions options;
  options.partial_query_timeout = 200ms;
  StoreThread store(options);
  auto stalled = TestClient::connect(store.port(), Dialect::kLegacy);
  auto idle = TestClient::connect(store.port(), Dialect::kLegacy);
  ASSERT_TRUE(stalled && idle);
  stalled->send_raw(std::string("\x00\x05\x00\x00\x00\x00\x00\x00\x00/ab", 12));  // half a SET
  EXPECT_TRUE(stalled->wait_closed());
  EXPECT_EQ(store.stats().stalled_dropped, 1u);
  EXPECT_EQ(idle->num_keys(), 0);  // idle connections stay (c10d clients idle for hours)
}

TEST(StoreServerTest, CloseEndsEveryConnectionAndIsIdempotent) {
  StoreThread store;
  auto a = TestClient::connect(store.port(), Dialect::kLegacy);
  auto b = TestClient::connect(store.port(), Dialect::kValidated);
  ASSERT_TRUE(a && b);
  b->send(make(Op::kWait, {"/never"}));
  EXPECT_EQ(a->num_keys(), 0);
  store.on_loop([](StoreServer& s) {
    s.close();
    s.close();
    return 0;
  });
  EXPECT_TRUE(a->wait_closed());
  EXPECT_TRUE(b->wait_closed());
  EXPECT_TRUE(store.stats_until([](const StoreStats& s) { return s.connections_open == 0; }));
}

// Workers forked by the agent must never inherit the store's sockets.
TEST(StoreServerTest, EverySocketIsCloseOnExec) {
  StoreThread store;
  auto a = TestClient::connect(store.port(), Dialect::kLegacy);  // SOCK_CLOEXEC themselves
  auto b = TestClient::connect(store.port(), Dialect::kValidated);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(store.stats_until([](const StoreStats& s) { return s.connections_open == 2; }));
  int sockets = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  ASSERT_NE(dir, nullptr);
  while (dirent* entry = ::readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    struct stat st {};
    if (entry->d_name[0] == '.' || fd == ::dirfd(dir) || ::fstat(fd, &st) != 0 ||
        !S_ISSOCK(st.st_mode)) {
      continue;
    }
    ++sockets;
    EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC) << "socket descriptor " << fd;
  }
  ::closedir(dir);
  EXPECT_GE(sockets, 5);  // the listener, two accepted, two clients
}

TEST(StoreServerTest, AdoptsABoundSocket) {
  boost::asio::io_context io;
  StoreServer server(io, {});
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  const uint16_t reserved = ntohs(addr.sin_port);
  const int raw = fd.get();  // made without SOCK_CLOEXEC, as a reservation might be
  Status s = server.adopt(std::move(fd));
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(server.port(), reserved);
  EXPECT_TRUE(::fcntl(raw, F_GETFD) & FD_CLOEXEC);
  std::thread loop([&] { io.run(); });
  auto c = TestClient::connect(reserved, Dialect::kLegacy);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->add("/n", 7), 7);
  boost::asio::post(io, [&] { server.close(); });
  loop.join();
}

TEST(StoreServerTest, AdoptRefusesWhatIsNotABoundTcpSocket) {
  boost::asio::io_context io;
  StoreServer server(io, {});
  EXPECT_TRUE(server.adopt(UniqueFd()).is_invalid_argument());
  EXPECT_TRUE(server.adopt(UniqueFd(::socket(AF_INET, SOCK_DGRAM, 0))).is_invalid_argument());
  Status unbound = server.adopt(UniqueFd(::socket(AF_INET, SOCK_STREAM, 0)));
  EXPECT_TRUE(unbound.is_invalid_argument());
  EXPECT_NE(unbound.message().find("not bound"), std::string::npos) << unbound.message();
  EXPECT_EQ(server.port(), 0);
}

using ddprun::testing::DescriptorExhaustion;
using ddprun::testing::most_resting_accepts;

// Out of file descriptors (a job larger than the node's limit), the store sheds newcomers
// (accepts each with its spare descriptor and closes it) without spinning the agent's thread,
// keeps serving the ranks it has, and takes newcomers again once descriptors are free.
TEST(StoreServerTest, OutOfDescriptorsItShedsNewcomersKeepsServingAndDoesNotSpin) {
  StoreThread store;
  auto existing = TestClient::connect(store.port(), Dialect::kValidated);
  ASSERT_TRUE(existing);
  existing->set("/k", "v");  // answered: the store holds the connection
  std::vector<UniqueFd> newcomers;
  for (int i = 0; i < 6; ++i) newcomers.emplace_back(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(store.port());
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  {
    DescriptorExhaustion full;
    ASSERT_TRUE(full.full());
    const auto started = std::chrono::steady_clock::now();
    const uint64_t tried_before = store.stats().out_of_descriptor_accepts;
    for (auto& fd : newcomers) {
      ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
    }
    timeval tv{10, 0};
    for (auto& fd : newcomers) {
      ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char byte = 0;
      EXPECT_EQ(::recv(fd.get(), &byte, 1, 0), 0) << "a newcomer was not shed";
    }
    EXPECT_EQ(existing->get("/k"), "v");
    EXPECT_EQ(existing->add("/n", 2), 2);
    const uint64_t tried = store.stats().out_of_descriptor_accepts - tried_before;
    const auto wall = std::chrono::steady_clock::now() - started;
    RecordProperty("accepts_while_out_of_descriptors", std::to_string(tried));
    // One failing accept per newcomer at least, and a rest after each: a loop that retried
    // accept at once would have tried thousands of times.
    EXPECT_GE(tried, 6u);
    EXPECT_LE(tried, most_resting_accepts(wall, Listener::kDescriptorPause,
                                          StoreServerOptions{}.acceptors))
        << "accepts tried while out of descriptors, in "
        << std::chrono::duration_cast<std::chrono::milliseconds>(wall).count() << " ms";
  }
  // Each newcomer shed once; the accepts that found nobody waiting are not sheds.
  EXPECT_EQ(store.stats().connections_shed, 6u);
  auto after = TestClient::connect(store.port(), Dialect::kLegacy);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->get("/k"), "v");
}

}  // namespace
}  // namespace ddprun::store::testing

namespace ddprun::store::testing {
namespace {

// Issue 25: 1,024 clients, each one rank's init_process_group traffic (init_traffic.h), all at
// once, in both dialects: every client is released, having read the right values (its PING's
// nonce, the "done" key's value), and the store holds what they wrote.
class InitTrafficTest : public ::testing::TestWithParam<Dialect> {};

TEST_P(InitTrafficTest, EveryClientOfAThousandIsReleasedWithTheRightValues) {
  constexpr int kClients = 1024;
  // Both ends of every connection live in this process: over 2,048 descriptors, more than a
  // default soft limit of 1,024 (raised to the hard limit, as ddprun raises its own).
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  limit.rlim_cur = limit.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
  ASSERT_GE(limit.rlim_cur, rlim_t{2 * kClients + 64}) << "the hard descriptor limit is too low";
  StoreThread server;
  boost::asio::io_context io(1);
  InitTrafficResult result;
  start_init_traffic(io, server.port(), GetParam(), kClients, 0, kClients, result);
  // Bounded: a client that is never released would leave work pending forever.
  io.run_for(std::chrono::seconds(60));
  EXPECT_EQ(result.errors, 0) << result.first_error;
  ASSERT_EQ(result.released, kClients);
  auto client = TestClient::connect(server.port(), GetParam());
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->add("init/count", 0), kClients);
  EXPECT_EQ(client->add("final/count", 0), kClients);
  EXPECT_EQ(client->get("final/done"), "1");
  EXPECT_EQ(client->get("rank/1023"), "127.0.0.1:29500");
  EXPECT_EQ(client->num_keys(), kClients + 4);  // every rank's key, two counters, two flags
}

INSTANTIATE_TEST_SUITE_P(BothDialects, InitTrafficTest,
                         ::testing::Values(Dialect::kValidated, Dialect::kLegacy),
                         [](const auto& info) {
                           return info.param == Dialect::kValidated ? "validated" : "legacy";
                         });

}  // namespace
}  // namespace ddprun::store::testing
