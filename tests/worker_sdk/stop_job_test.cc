// ddp::stop_job (issue 36): the notice it sends on the worker channel, and a real process that
// calls it: the agent's socket gets the notice, the process exits 79.
#include "ddp/stop_job.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"
#include "worker_sdk/src/stop_job_notice.h"

namespace {

TEST(StopJobNotice, TheWorkerChannelsJsonWithTheReason) {
  const auto notice = nlohmann::json::parse(ddp::detail::stop_job_notice("NaN loss", 1, 4242));
  EXPECT_EQ(notice.at("event"), "stop_job");
  EXPECT_EQ(notice.at("local_rank"), 1);
  EXPECT_EQ(notice.at("pid"), 4242);
  EXPECT_EQ(notice.at("reason"), "NaN loss");
}

TEST(StopJobNotice, ALongReasonIsCutToFitOneDatagram) {
  const std::string notice = ddp::detail::stop_job_notice(std::string(20000, 'x'), 0, 1);
  EXPECT_LE(notice.size(), 8192u);
  EXPECT_GT(nlohmann::json::parse(notice).at("reason").get<std::string>().size(), 1000u);
}

TEST(StopJob, TellsTheAgentsSocketAndExits79) {
  const ddprun::testing::TempDir temp;
  const std::string path = temp.path() + "/agent.sock";
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(address.sun_path));
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setenv("DDPRUN_WORKER_SOCKET", path.c_str(), 1);
    ::setenv("LOCAL_RANK", "3", 1);
    ddp::stop_job("bad data");
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), ddp::kExitDoNotRequeue);
  char buffer[8192];
  const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);  // sent before it exited
  ::close(fd);
  ASSERT_GT(n, 0);
  const auto notice = nlohmann::json::parse(std::string(buffer, static_cast<std::size_t>(n)));
  EXPECT_EQ(notice.at("reason"), "bad data");
  EXPECT_EQ(notice.at("local_rank"), 3);
  EXPECT_EQ(notice.at("pid"), child);
}

}  // namespace
