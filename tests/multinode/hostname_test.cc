// Real hosts, not only loopback: nodes whose host name resolves locally to 127.0.1.1 (the
// /etc/hosts line a stock Debian or Ubuntu host has), with no --local_addr. Each node runs in
// its own UTS and mount namespace (its own host name, its own /etc/hosts naming itself
// 127.0.1.1 and the others by their addresses), all in one network namespace that the test
// creates, whose loopback carries only the hosts' own addresses 127.0.0.1-3 (/32 each).
// There, as on a real network, 127.0.1.1 is nobody's address that another node could reach: a
// store listening on it serves no other node. The rendezvous is ddp-rendezvous on 127.0.0.1 of
// that namespace (a head node). A 2-node gloo job must train; the same job with the old choice
// of MASTER_ADDR (the host name, which --local_addr <name> reproduces) must not.
//
// Needs root (namespaces) and util-linux's unshare and nsenter, iproute2's ip: the test skips,
// saying so, where they are missing. Runs once per torch.
#include <unistd.h>

#include <functional>

#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class HostnameTest : public MultinodeTest {
 protected:
  void SetUp() override {
    MultinodeTest::SetUp();
    for (const char* tool : {"/usr/bin/unshare", "/usr/bin/nsenter", "/usr/sbin/ip"}) {
      if (::access(tool, X_OK) != 0) GTEST_SKIP() << tool << " is missing";
    }
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create namespaces";
    // The network namespace lives as long as this process holds it.
    ChildOptions holder;
    holder.executable = "/usr/bin/unshare";
    holder.args = {"--net", "--", "/bin/sh", "-c",
                   "ip link set lo up && ip addr del 127.0.0.1/8 dev lo && "
                   "for n in 1 2 3; do ip addr add 127.0.0.$n/32 dev lo || exit 1; done && "
                   "echo ready && exec sleep 600"};
    holder.env = env_;
    auto child = ChildProcess::start(holder);
    ASSERT_TRUE(child.ok()) << child.error_message();
    network_ = std::move(child.value());
    if (!network_->wait_for_stdout("ready\n", deadline_after(10s))) {
      GTEST_SKIP() << "cannot make a network namespace here: " << network_->stderr_text();
    }
    netns_ = "/proc/" + std::to_string(network_->pid()) + "/ns/net";
  }

  void TearDown() override {
    head_.reset();  // ended before the fixture counts what outlived the test
    network_.reset();
    MultinodeTest::TearDown();
  }

  // `executable args...` as host `name` inside the test's network: its own host name and
  // /etc/hosts (`hosts`), in the shared network namespace.
  std::unique_ptr<ChildProcess> start_on_host(const std::string& name, const std::string& hosts,
                                              const std::string& executable,
                                              const std::vector<std::string>& args, int node) {
    const std::string hosts_file = temp() / ("hosts_" + name);
    write_text_file(hosts_file, hosts);
    std::vector<std::string> command = {
        "--net=" + netns_,
        "--",
        "/usr/bin/unshare",
        "--uts",
        "--mount",
        "--",
        "/bin/sh",
        "-c",
        "hostname \"$1\" && mount --bind \"$2\" /etc/hosts && shift 2 && exec \"$@\"",
        "sh",
        name,
        hosts_file,
        executable};
    command.insert(command.end(), args.begin(), args.end());
    return start_as_node(node, "/usr/bin/nsenter", command);
  }

  // ddp-rendezvous on 127.0.0.1 of the test's network; returns its endpoint.
  std::string start_head() {
    head_ = start_on_host("head", "127.0.0.1 localhost head\n", daemon_binary(),
                          {"--host", "127.0.0.1", "--port", "0"}, 0);
    if (!head_) return {};
    const std::string prefix = "listening on 127.0.0.1:";
    if (!head_->wait_for_stdout("\n", deadline_after(10s)) ||
        head_->stdout_text().rfind(prefix, 0) != 0) {
      ADD_FAILURE() << "ddp-rendezvous did not start: " << head_->stderr_text();
      return {};
    }
    const std::string line = head_->stdout_text();
    return "127.0.0.1:" + line.substr(prefix.size(), line.find('\n') - prefix.size());
  }

  // The two nodes' /etc/hosts: each names itself 127.0.1.1, the other by its address.
  static std::string hosts_of(int node) {
    const int other = node == 1 ? 2 : 1;
    return "127.0.0.1 localhost\n127.0.1.1 node" + std::to_string(node) + "\n" +
           node_addr(other + 1) + " node" + std::to_string(other) + "\n";
  }

  // Runs the 2-node job; `extra(node)`: more flags for that node.
  std::vector<RunResult> run_job(const std::function<std::vector<std::string>(int)>& extra) {
    const std::string endpoint = start_head();
    if (endpoint.empty()) return {};
    std::vector<std::unique_ptr<ChildProcess>> nodes;
    for (int node = 1; node <= 2; ++node) {
      std::vector<std::string> args = {
          "--nnodes",       "2",        "--nproc_per_node", "2",
          "--rdzv_backend", "c10d",     "--rdzv_endpoint",  endpoint,
          "--rdzv_id",      "hostname", "--rdzv_conf",      RdzvTimeouts{}.conf()};
      for (const auto& flag : extra(node)) args.push_back(flag);
      args.push_back(mn_worker("allreduce.py"));
      nodes.push_back(start_on_host("node" + std::to_string(node), hosts_of(node), ddprun_binary(),
                                    args, node));
      if (!nodes.back()) return {};
    }
    return finish_all(nodes, deadline_after(120s));
  }

  std::unique_ptr<ChildProcess> network_;
  std::unique_ptr<ChildProcess> head_;
  std::string netns_;
};

TEST_F(HostnameTest, NodesWhoseNameIsLoopbackTrainTogetherWithoutLocalAddr) {
  const auto runs = run_job([](int) { return std::vector<std::string>{}; });
  ASSERT_EQ(runs.size(), 2u);
  for (int n = 0; n < 2; ++n) ASSERT_TRUE(ExitedWith(runs[n], 0)) << "node " << n + 1;
  const auto results = markers("allreduce_");
  ASSERT_EQ(results.size(), 4u);
  for (const auto& [name, m] : results) {
    EXPECT_EQ(m["sum"].get<double>(), 10.0) << name;  // 1 + 2 + 3 + 4
    EXPECT_NE(m["MASTER_ADDR"], "127.0.1.1") << name;
  }
}

// The old choice, MASTER_ADDR = the host name: group rank 0's store would listen on 127.0.1.1.
TEST_F(HostnameTest, TheHostNameAsMasterAddrCannotServeTheOtherNode) {
  const auto runs = run_job([](int node) {
    return std::vector<std::string>{"--local_addr", "node" + std::to_string(node)};
  });
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_FALSE(ExitedWith(runs[0], 0) && ExitedWith(runs[1], 0));
  EXPECT_TRUE(markers("allreduce_").empty());
  for (const auto& run : runs) EXPECT_NE(run.err.find("127.0.1.1"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace ddprun::testing
