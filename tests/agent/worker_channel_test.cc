// The worker channel (agent/process/worker_channel.h): the pure notice parser, and the real
// datagram socket read on an Asio loop, fed by this test process as a worker's bootstrap would.
#include "agent/process/worker_channel.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include "tests/support/run_until.h"

namespace ddprun::agent {
namespace {

using std::chrono::seconds;

TEST(WorkerNoticeParse, AnExceptionWithItsMessageFromTheKernelsSender) {
  auto notice = parse_worker_notice(
      R"({"event": "exception", "local_rank": 1, "pid": 99, "message": "RuntimeError: boom"})",
      4242);
  ASSERT_TRUE(notice.ok()) << notice.error_message();
  EXPECT_EQ(notice->kind, WorkerNotice::Kind::kException);
  EXPECT_EQ(notice->pid, 4242);  // the kernel's word, not the message's
  EXPECT_EQ(notice->message, "RuntimeError: boom");
}

TEST(WorkerNoticeParse, AStopJobRequestWithItsReason) {
  auto notice = parse_worker_notice(
      R"({"event": "stop_job", "local_rank": 0, "pid": 7, "reason": "NaN loss at step 1200"})",
      4242);
  ASSERT_TRUE(notice.ok()) << notice.error_message();
  EXPECT_EQ(notice->kind, WorkerNotice::Kind::kStopJob);
  EXPECT_EQ(notice->pid, 4242);
  EXPECT_EQ(notice->message, "NaN loss at step 1200");
  auto bare = parse_worker_notice(R"({"event": "stop_job"})", 1);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->message, "no reason given");
}

TEST(WorkerNoticeParse, AnExcludeNodeRequestWithItsReason) {
  auto notice = parse_worker_notice(
      R"({"event": "exclude_node", "local_rank": 3, "pid": 7, "reason": "ECC errors on GPU 3"})",
      4242);
  ASSERT_TRUE(notice.ok()) << notice.error_message();
  EXPECT_EQ(notice->kind, WorkerNotice::Kind::kExcludeNode);
  EXPECT_EQ(notice->pid, 4242);
  EXPECT_EQ(notice->local_rank, 3);
  EXPECT_EQ(notice->message, "ECC errors on GPU 3");
  auto bare = parse_worker_notice(R"({"event": "exclude_node", "reason": 17})", 1);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->message, "no reason given");
}

TEST(WorkerNoticeParse, MalformedNoticesAreRefusedSayingWhat) {
  for (const std::string bad : {"", "not json", "[1]", R"({"message": "x"})", R"({"event": 3})",
                                R"({"event": "reboot"})"}) {
    auto notice = parse_worker_notice(bad, 1);
    ASSERT_FALSE(notice.ok()) << bad;
    EXPECT_TRUE(notice.status().is_invalid_argument()) << bad;
  }
  EXPECT_FALSE(parse_worker_notice(std::string(kMaxNoticeBytes + 1, ' '), 1).ok());
  auto long_message = parse_worker_notice(
      R"({"event": "exception", "message": ")" + std::string(5000, 'x') + R"("})", 1);
  ASSERT_TRUE(long_message.ok());
  EXPECT_EQ(long_message->message.size(), 2000u);
}

class UnixWorkerChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = UnixWorkerChannel::open(io);
    ASSERT_TRUE(opened.ok()) << opened.error_message();
    channel = std::move(opened.value());
    channel->set_handler([this](const WorkerNotice& n) { notices.push_back(n); });
    ASSERT_EQ(channel->worker_env().size(), 1u);
    path = channel->worker_env()[0].second;
  }
  void send(const std::string& datagram) {
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    const ssize_t sent = ::sendto(fd, datagram.data(), datagram.size(), 0,
                                  reinterpret_cast<const sockaddr*>(&address), sizeof address);
    ::close(fd);
    ASSERT_EQ(sent, static_cast<ssize_t>(datagram.size())) << std::strerror(errno);
  }

  boost::asio::io_context io;
  std::unique_ptr<UnixWorkerChannel> channel;
  std::string path;
  std::vector<WorkerNotice> notices;
};

TEST_F(UnixWorkerChannelTest, ADatagramFromAWorkerIsANoticeWithItsSendersPid) {
  EXPECT_EQ(channel->worker_env()[0].first, "DDPRUN_WORKER_SOCKET");
  send(R"({"event": "exception", "local_rank": 0, "pid": 1, "message": "ValueError: x"})");
  ASSERT_TRUE(ddprun::testing::run_until(
      io, [&] { return !notices.empty(); }, seconds(10)));
  EXPECT_EQ(notices[0].pid, ::getpid());
  EXPECT_EQ(notices[0].message, "ValueError: x");
}

TEST_F(UnixWorkerChannelTest, GarbageIsDroppedAndTheChannelGoesOn) {
  send("garbage");
  send(std::string(kMaxNoticeBytes + 100, '{'));  // longer than a notice may be
  send(R"({"event": "exception", "message": "after"})");
  ASSERT_TRUE(ddprun::testing::run_until(
      io, [&] { return !notices.empty(); }, seconds(10)));
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].message, "after");
}

TEST_F(UnixWorkerChannelTest, ItsPrivateDirectoryGoesWithIt) {
  const auto dir = std::filesystem::path(path).parent_path();
  EXPECT_EQ(std::filesystem::status(dir).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  channel.reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace ddprun::agent
