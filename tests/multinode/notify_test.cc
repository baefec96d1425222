// systemd's notify protocol, end to end without systemd: a datagram socket in the test's temp
// dir is NOTIFY_SOCKET (with WATCHDOG_USEC) for a real ddprun and a real ddp-rendezvous, and
// the test checks what arrives and in which order: READY=1 once (after the workers started /
// once the daemon listens), STATUS= lines on changes, WATCHDOG=1 pings from the event loop,
// STOPPING=1 last, a failed health check's reason in the STATUS. Workers must not see
// NOTIFY_SOCKET, WATCHDOG_USEC or WATCHDOG_PID.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <csignal>
#include <filesystem>
#include <regex>

#include "common/posix_fd.h"
#include "tests/integration/proc_watch.h"
#include "tests/integration/test_files.h"
#include "tests/multinode/multinode_fixture.h"
#include "tests/multinode/notify_listener.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The children of `pid` that are not ddprun's sentinel: its workers.
int running_workers(pid_t pid) {
  int n = 0;
  for (pid_t child : children_of(pid)) {
    const std::string comm = read_text_file("/proc/" + std::to_string(child) + "/comm");
    if (comm.rfind("ddprun-sentinel", 0) != 0 && is_process_alive(child)) ++n;
  }
  return n;
}

class NotifyTest : public MultinodeTest {
 protected:
  void SetUp() override {
    MultinodeTest::SetUp();
    listener_.emplace(temp() / "notify.sock");
    env_["NOTIFY_SOCKET"] = listener_->path();
    env_["WATCHDOG_USEC"] = "200000";  // a ping every 100 ms
  }
  // Every message before the first READY=1 is a joining STATUS or a ping.
  void expect_only_joining_before_ready() {
    const int ready = listener_->find("READY=1");
    ASSERT_GE(ready, 0) << listener_->dump();
    for (int i = 0; i < ready; ++i) {
      const std::string& m = listener_->messages()[i];
      EXPECT_TRUE(m == "WATCHDOG=1" || starts_with(m, "STATUS=job ")) << m;
      EXPECT_EQ(m.find("running"), std::string::npos) << m;
    }
  }

  std::optional<NotifyListener> listener_;
};

TEST_F(NotifyTest, AgentIsReadyOnceItsWorkersRunPingsFromItsLoopAndStopsLast) {
  make_fifo(out("release"));
  auto node = start_ddprun({"--nproc_per_node", "2", "--rdzv_id", "svc-job",
                            mn_worker("service_worker.py"), "--release", out("release")});
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(listener_->wait_for([](const std::string& m) { return starts_with(m, "READY=1"); },
                                  deadline_after(30s)))
      << listener_->dump() << node->stderr_text();
  // READY=1 comes after both workers were started: they exist now (and can only end once
  // released).
  EXPECT_EQ(running_workers(node->pid()), 2);
  // libsystemd is loaded because NOTIFY_SOCKET is set (and only then: see SlurmTest).
  EXPECT_NE(read_text_file("/proc/" + std::to_string(node->pid()) + "/maps").find("libsystemd"),
            std::string::npos);
  const std::string ready = listener_->messages().back();
  EXPECT_NE(ready.find("\nSTATUS=job svc-job: running; round 0, world size 2"), std::string::npos)
      << ready;
  expect_only_joining_before_ready();

  // The workers did not inherit the agent's service variables.
  ASSERT_TRUE(wait_for_markers("svc_", 2, deadline_after(30s))) << node->stderr_text();
  for (const auto& [name, info] : markers("svc_")) {
    EXPECT_TRUE(info.at("service_env").empty()) << name << ": " << info.dump();
  }
  // The loop pings while the job runs.
  const int before = listener_->pings();
  ASSERT_TRUE(listener_->wait_for(
      [&](const std::string&) { return listener_->pings() >= before + 3; }, deadline_after(20s)))
      << listener_->dump();

  release("release", 2);
  const RunResult run = finish(*node, deadline_after(30s));
  ASSERT_TRUE(ExitedWith(run, 0));
  listener_->drain();  // ddprun has exited: everything it sent is queued
  const auto messages = listener_->without_pings();
  ASSERT_GE(messages.size(), 2u) << listener_->dump();
  EXPECT_EQ(listener_->messages().back(), "STOPPING=1") << listener_->dump();
  EXPECT_EQ(messages[messages.size() - 2].rfind("STATUS=job svc-job: finished (exit code 0)", 0),
            0u)
      << listener_->dump();
  int readies = 0;
  for (const auto& m : messages) readies += starts_with(m, "READY=1");
  EXPECT_EQ(readies, 1);
}

TEST_F(NotifyTest, ARestartShowsInTheStatusAndReadyIsSentOnce) {
  make_fifo(out("release"));
  auto node =
      start_ddprun({"--nproc_per_node", "2", "--max_restarts", "1", "--rdzv_id", "r",
                    mn_worker("service_worker.py"), "--fail-first", "--release", out("release")});
  ASSERT_NE(node, nullptr);
  // Rank 0 fails at once; the group restarts; both workers of attempt 1 then wait.
  ASSERT_TRUE(wait_for_markers("svc_n0_w2_r1", 2, deadline_after(40s))) << node->stderr_text();
  release("release", 2);
  const RunResult run = finish(*node, deadline_after(30s));
  ASSERT_TRUE(ExitedWith(run, 0));
  listener_->drain();
  std::vector<std::string> states;
  int readies = 0;
  for (const auto& m : listener_->without_pings()) {
    readies += starts_with(m, "READY=1");
    states.push_back(m.substr(0, m.find(';')));
  }
  EXPECT_EQ(readies, 1) << listener_->dump();
  const std::vector<std::string> expected{
      "STATUS=job r: joining the first round",
      "READY=1\nSTATUS=job r: running",
      "STATUS=job r: stopping workers",
      "STATUS=job r: restarting",
      "STATUS=job r: running",
      "STATUS=job r: stopping workers",
      "STATUS=job r: finished (exit code 0)",
      "STOPPING=1",
  };
  EXPECT_EQ(states, expected) << listener_->dump();
  EXPECT_NE(listener_->dump().find("restarts 1/1"), std::string::npos) << listener_->dump();
}

TEST_F(NotifyTest, WithHangDetectionTheStatusShowsStepsAndTheOldestHeartbeat) {
  make_fifo(out("release"));
  auto node =
      start_ddprun({"--nproc_per_node", "2", "--rdzv_id", "hb", "--hang_timeout", "60",
                    mn_worker("service_worker.py"), "--heartbeat", "--release", out("release")});
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(wait_for_markers("svc_", 2, deadline_after(30s))) << node->stderr_text();
  // Rank 0 sent step 10 once; rank 1 sends step 12 every 0.1 s. Once rank 0's heartbeat is a
  // second old, the line names it.
  const std::regex named(
      "STATUS=job hb: running; round 0, world size 2 \\(1 node, this is node 0 with 2 "
      "workers\\); restarts 0/0; steps 10-12, oldest heartbeat [0-9]+\\.[0-9] s \\(rank 0\\)");
  ASSERT_TRUE(listener_->wait_for([&](const std::string& m) { return std::regex_match(m, named); },
                                  deadline_after(20s)))
      << listener_->dump() << node->stderr_text();

  release("release", 2);
  ASSERT_TRUE(ExitedWith(finish(*node, deadline_after(30s)), 0));
  listener_->drain();
  const auto messages = listener_->without_pings();
  EXPECT_EQ(messages.back(), "STOPPING=1") << listener_->dump();
  for (std::size_t i = 1; i < messages.size(); ++i) {
    // A line is sent again only when it changed; progress only while running.
    EXPECT_NE(messages[i], messages[i - 1]) << listener_->dump();
    if (messages[i].find("steps") != std::string::npos) {
      EXPECT_NE(messages[i].find(": running;"), std::string::npos) << messages[i];
    }
  }
}

// A node that fails its --health_check before the round: systemctl status says why (the
// check's first line; its output stays in the log), and the node stops without being ready.
TEST_F(NotifyTest, AFailedHealthCheckIsTheStatusAndTheNodeStopsWithoutReady) {
  const RunResult run = run_ddprun({"--nproc_per_node", "1", "--rdzv_id", "hc", "--health_check",
                                    "echo 'GPU 3: 12 uncorrected ECC errors' >&2; exit 1",
                                    "--no_python", "/bin/true"});
  ASSERT_TRUE(ExitedWith(run, 69)) << run.err;  // kExitUnhealthy
  listener_->drain();                           // ddprun has exited: everything it sent is queued
  const auto messages = listener_->without_pings();
  int failed = -1;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    EXPECT_FALSE(starts_with(messages[i], "READY=1")) << listener_->dump();
    if (failed < 0 && starts_with(messages[i], "STATUS=job hc: ") &&
        messages[i].find("this node failed its health check: it exited with status 1") !=
            std::string::npos) {
      failed = static_cast<int>(i);
    }
  }
  ASSERT_GE(failed, 0) << listener_->dump();
  EXPECT_EQ(messages[failed].find("ECC"), std::string::npos)
      << "the STATUS line carries the first line only: " << messages[failed];
  EXPECT_NE(run.err.find("GPU 3: 12 uncorrected ECC errors"), std::string::npos) << run.err;
  EXPECT_EQ(listener_->messages().back(), "STOPPING=1") << listener_->dump();
}

TEST_F(NotifyTest, AnUnloadableLibsystemdIsAWarningAndTheJobRuns) {
  // A libsystemd.so.0 that is not a library, found first through LD_LIBRARY_PATH.
  const std::string libs = temp() / "libs";
  std::filesystem::create_directories(libs);
  write_text_file(libs + "/libsystemd.so.0", "not a shared library\n");
  env_["LD_LIBRARY_PATH"] = libs;
  const RunResult run = run_ddprun({"--nproc_per_node", "1", "--no_python", "/bin/true"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_NE(run.err.find("NOTIFY_SOCKET is set, but cannot load libsystemd.so.0: " + libs),
            std::string::npos)
      << run.err;
  listener_->drain();
  EXPECT_TRUE(listener_->messages().empty()) << listener_->dump();
}

// A TCP connection to 127.0.0.1:port succeeds.
bool accepts_connections(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
}

TEST_F(NotifyTest, DaemonIsReadyWhenItListensReportsJobsAndStopsLast) {
  std::string endpoint;
  auto daemon = start_daemon(&endpoint);
  ASSERT_NE(daemon, nullptr);
  ASSERT_TRUE(listener_->wait_for([](const std::string& m) { return starts_with(m, "READY=1"); },
                                  deadline_after(10s)))
      << listener_->dump();
  const std::string port = endpoint.substr(endpoint.find(':') + 1);
  EXPECT_EQ(listener_->messages().back(), "READY=1\nSTATUS=listening on 127.0.0.1:" + port +
                                              "; 0 jobs, 0 connections (0 accepted since start)");
  EXPECT_TRUE(accepts_connections(static_cast<uint16_t>(std::stoi(port))));

  // A job's node connects: the status line follows (within its refresh period).
  make_fifo(out("release"));
  NodeSpec spec;
  spec.node = 1;
  spec.nnodes = "1";
  spec.nproc_per_node = 1;
  spec.endpoint = endpoint;
  spec.job = "daemon-job";
  spec.entry = {mn_worker("service_worker.py"), "--release", out("release")};
  env_.erase("NOTIFY_SOCKET");  // the node is not the daemon: it must not talk on its socket
  env_.erase("WATCHDOG_USEC");
  auto node = start_node(spec);
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(listener_->wait_for(
      [](const std::string& m) { return m.find("; 1 job, ") != std::string::npos; },
      deadline_after(20s)))
      << listener_->dump() << node->stderr_text();
  ASSERT_TRUE(wait_for_markers("svc_", 1, deadline_after(30s))) << node->stderr_text();
  release("release", 1);
  ASSERT_TRUE(ExitedWith(finish(*node, deadline_after(30s)), 0));
  const int before = listener_->pings();
  ASSERT_TRUE(listener_->wait_for(
      [&](const std::string&) { return listener_->pings() >= before + 2; }, deadline_after(20s)))
      << listener_->dump();

  daemon->send_signal(SIGTERM);
  ASSERT_TRUE(ExitedWith(finish(*daemon, deadline_after(15s)), 0));
  listener_->drain();
  EXPECT_EQ(listener_->messages().back(), "STOPPING=1") << listener_->dump();
  int readies = 0;
  for (const auto& m : listener_->messages()) readies += starts_with(m, "READY=1");
  EXPECT_EQ(readies, 1);
}

}  // namespace
}  // namespace ddprun::testing
