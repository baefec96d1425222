#include "tests/multinode/multinode_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <system_error>

#include "common/posix_fd.h"

namespace ddprun::testing {

std::string node_addr(int n) { return "127.0.0." + std::to_string(n); }

uint16_t free_port(const std::string& addr) {
  // A port from bind(0) could be taken, before ddprun binds it, by any connection's source
  // port or any port-0 server of a test running beside this one.
  return free_port_outside_ephemeral_range(addr);
}

std::string RdzvTimeouts::conf() const {
  return "join_timeout=" + join_timeout + ",last_call_timeout=" + last_call_timeout +
         ",heartbeat_timeout=" + heartbeat_timeout + ",keep_alive_interval=" + keep_alive_interval +
         (more.empty() ? "" : "," + more);
}

std::string MultinodeTest::mn_worker(const std::string& name) {
  return std::string(DDPRUN_SOURCE_DIR) + "/tests/multinode/workers/" + name;
}

std::string MultinodeTest::daemon_binary() { return DDP_RENDEZVOUS_BINARY; }

std::unique_ptr<ChildProcess> MultinodeTest::start_node_args(int node,
                                                             const std::vector<std::string>& args) {
  return start_as_node(node, ddprun_binary(), args);
}

std::unique_ptr<ChildProcess> MultinodeTest::start_as_node(int node, const std::string& executable,
                                                           const std::vector<std::string>& args) {
  ChildOptions options;
  options.executable = executable;
  options.args = args;
  options.env = env_;
  options.env["DDPRUN_TEST_NODE"] = std::to_string(node);
  options.cwd = temp().path();
  auto child = ChildProcess::start(options);
  if (!child) {
    ADD_FAILURE() << "starting node " << node << ": " << child.error_message();
    return nullptr;
  }
  return std::move(child.value());
}

std::unique_ptr<ChildProcess> MultinodeTest::start_node(const NodeSpec& spec) {
  std::vector<std::string> args{"--nnodes",         spec.nnodes,
                                "--nproc_per_node", std::to_string(spec.nproc_per_node),
                                "--rdzv_backend",   "c10d",
                                "--rdzv_endpoint",  spec.endpoint,
                                "--rdzv_id",        spec.job,
                                "--local_addr",     node_addr(spec.node),
                                "--rdzv_conf",      spec.timeouts.conf()};
  args.insert(args.end(), spec.extra.begin(), spec.extra.end());
  args.insert(args.end(), spec.entry.begin(), spec.entry.end());
  return start_node_args(spec.node, args);
}

std::unique_ptr<ChildProcess> MultinodeTest::start_daemon(std::string* endpoint,
                                                          const std::vector<std::string>& extra) {
  ChildOptions options;
  options.executable = daemon_binary();
  options.args = {"--host", "127.0.0.1", "--port", "0"};
  options.args.insert(options.args.end(), extra.begin(), extra.end());
  options.env = env_;
  options.cwd = temp().path();
  auto child = ChildProcess::start(options);
  if (!child) {
    ADD_FAILURE() << "starting ddp-rendezvous: " << child.error_message();
    return nullptr;
  }
  auto daemon = std::move(child.value());
  const std::string prefix = "listening on 127.0.0.1:";
  if (!daemon->wait_for_stdout("\n", deadline_after(std::chrono::seconds(10))) ||
      daemon->stdout_text().rfind(prefix, 0) != 0) {
    ADD_FAILURE() << "ddp-rendezvous did not report its port; stdout: " << daemon->stdout_text()
                  << "\nstderr: " << daemon->stderr_text();
    return nullptr;
  }
  const std::string line = daemon->stdout_text();
  *endpoint = "127.0.0.1:" + line.substr(prefix.size(), line.find('\n') - prefix.size());
  return daemon;
}

::testing::AssertionResult MultinodeTest::wait_for_standby_node(const std::string& endpoint,
                                                                Deadline deadline) const {
  while (TestClock::now() < deadline) {
    ChildOptions status;
    status.executable = daemon_binary();
    status.args = {"status", "--endpoint", endpoint};
    status.env = env_;
    auto child = ChildProcess::start(status);
    if (!child) return ::testing::AssertionFailure() << child.error_message();
    const RunResult table = finish(**child, deadline);
    if (table.out.find("standby") != std::string::npos) return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no node showed as waiting at " << endpoint;
}

std::map<std::string, nlohmann::json> MultinodeTest::markers(const std::string& prefix) const {
  std::map<std::string, nlohmann::json> found;
  for (const std::string& name : list_dir(out_dir())) {
    const bool temporary = name.size() >= 4 && name.substr(name.size() - 4) == ".tmp";
    if (name.rfind(prefix, 0) != 0 || temporary) {
      continue;
    }
    found[name] = nlohmann::json::parse(read_text_file(out(name)), nullptr, false);
  }
  return found;
}

bool MultinodeTest::wait_for_markers(const std::string& prefix, std::size_t count,
                                     Deadline deadline) const {
  UniqueFd inotify(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!inotify.valid() ||
      ::inotify_add_watch(inotify.get(), out_dir().c_str(), IN_MOVED_TO | IN_CREATE) < 0) {
    ADD_FAILURE() << "inotify on " << out_dir() << ": " << std::strerror(errno);
    return false;
  }
  // Watching first, then counting: a marker renamed in between is seen by the count.
  for (;;) {
    if (markers(prefix).size() >= count) return true;
    pollfd p{inotify.get(), POLLIN, 0};
    const int timeout = poll_timeout_ms(deadline);
    if (timeout == 0) return false;
    if (::poll(&p, 1, timeout) > 0) {
      char buffer[4096];
      while (::read(inotify.get(), buffer, sizeof buffer) > 0) {
      }
    }
  }
}

void MultinodeTest::release(const std::string& name, std::size_t bytes) {
  UniqueFd fd(::open(out(name).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(fd.valid()) << "open " << out(name) << ": " << std::strerror(errno);
  const std::string data(bytes, 'x');
  ASSERT_EQ(::write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(bytes));
}

std::vector<RunResult> MultinodeTest::finish_all(std::vector<std::unique_ptr<ChildProcess>>& nodes,
                                                 Deadline deadline) {
  std::vector<RunResult> results;
  for (auto& node : nodes) {
    results.push_back(node ? finish(*node, deadline) : RunResult{});
  }
  return results;
}

std::string root_cause_section(const std::string& err) {
  const auto at = err.find("Root Cause (first observed failure):");
  if (at == std::string::npos) return "";
  const auto end = err.find("\n=", at);
  return err.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace ddprun::testing
