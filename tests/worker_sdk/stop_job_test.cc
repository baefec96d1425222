// ddp::stop_job and ddp::exclude_node (issue 36): the notice each sends on the worker channel,
// and a real process that calls it: the agent's socket gets the notice, the process exits 79
// (stop_job) or 69 (exclude_node).
#include "ddp/stop_job.h"

#include "ddp/exclude_node.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"
#include "worker_sdk/src/worker_notice.h"

namespace {

TEST(StopJobNotice, TheWorkerChannelsJsonWithTheReason) {
  const auto notice =
      nlohmann::json::parse(ddp::detail::worker_notice("stop_job", "NaN loss", 1, 4242));
  EXPECT_EQ(notice.at("event"), "stop_job");
  EXPECT_EQ(notice.at("local_rank"), 1);
  EXPECT_EQ(notice.at("pid"), 4242);
  EXPECT_EQ(notice.at("reason"), "NaN loss");
}

TEST(StopJobNotice, ALongReasonIsCutToFitOneDatagram) {
  const std::string notice = ddp::detail::worker_notice("stop_job", std::string(20000, 'x'), 0, 1);
  EXPECT_LE(notice.size(), 8192u);
  EXPECT_GT(nlohmann::json::parse(notice).at("reason").get<std::string>().size(), 1000u);
}

// The agent's socket, bound in a temp dir: what a child that calls `call` sends to it.
class AgentSocket {
 public:
  AgentSocket() : path_(temp_.path() + "/agent.sock") {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path_.c_str(), path_.size() + 1);
    bound_ = fd_ >= 0 && path_.size() < sizeof(address.sun_path) &&
             ::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  }
  ~AgentSocket() { ::close(fd_); }
  bool bound() const { return bound_; }

  // Runs `call` in a child with the worker channel's variables; its exit status.
  template <class F>
  int run_child(F call, pid_t& child) {
    child = ::fork();
    if (child == 0) {
      ::setenv("DDPRUN_WORKER_SOCKET", path_.c_str(), 1);
      ::setenv("LOCAL_RANK", "3", 1);
      call();
    }
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
  }
  // The datagram the child sent before it exited (empty JSON object when none).
  nlohmann::json notice() const {
    char buffer[8192];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n <= 0) return nlohmann::json::object();
    return nlohmann::json::parse(std::string(buffer, static_cast<std::size_t>(n)));
  }

 private:
  const ddprun::testing::TempDir temp_;
  const std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(StopJob, TellsTheAgentsSocketAndExits79) {
  AgentSocket agent;
  ASSERT_TRUE(agent.bound());
  pid_t child = -1;
  EXPECT_EQ(agent.run_child([] { ddp::stop_job("bad data"); }, child), ddp::kExitDoNotRequeue);
  const auto notice = agent.notice();
  EXPECT_EQ(notice.value("event", ""), "stop_job");
  EXPECT_EQ(notice.value("reason", ""), "bad data");
  EXPECT_EQ(notice.value("local_rank", -1), 3);
  EXPECT_EQ(notice.value("pid", -1), child);
}

TEST(ExcludeNode, TellsTheAgentsSocketAndExits69) {
  AgentSocket agent;
  ASSERT_TRUE(agent.bound());
  pid_t child = -1;
  EXPECT_EQ(agent.run_child([] { ddp::exclude_node("ECC errors on GPU 3"); }, child),
            ddp::kExitNodeExcluded);
  EXPECT_EQ(ddp::kExitNodeExcluded, 69);
  const auto notice = agent.notice();
  EXPECT_EQ(notice.value("event", ""), "exclude_node");
  EXPECT_EQ(notice.value("reason", ""), "ECC errors on GPU 3");
  EXPECT_EQ(notice.value("local_rank", -1), 3);
  EXPECT_EQ(notice.value("pid", -1), child);
}

TEST(ExcludeNode, OutsideDdprunItSaysWhyOnStderrAndExits69) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::unsetenv("DDPRUN_WORKER_SOCKET");
    ddp::exclude_node("bad NIC");
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 69);
}

}  // namespace
