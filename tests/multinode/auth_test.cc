// The control plane authenticated end to end, with real agents and workers: a daemon with a
// job token serves the nodes that hold it and turns away one with a wrong token and one with
// none (each told what to fix, the daemon logging who it refused), while the job runs on
// untouched; and a c10d job whose hosting agent serves mutual TLS with a token.
#include <sys/stat.h>

#include <fstream>
#include <set>

#include "tests/multinode/multinode_fixture.h"
#include "tests/rendezvous/test_pki.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class AuthTest : public MultinodeTest {
 protected:
  std::string token_file(const std::string& name, const std::string& secret) {
    const std::string path = out(name + ".token");
    std::ofstream(path) << secret << "\n";
    ::chmod(path.c_str(), 0600);
    return path;
  }
  NodeSpec node(int n, const std::string& endpoint, const std::string& conf) const {
    NodeSpec spec;
    spec.node = n;
    spec.endpoint = endpoint;
    spec.job = "authjob";
    spec.timeouts.more = conf;
    spec.entry = {mn_worker("hold.py"), "--release", out("release.fifo")};
    return spec;
  }
  // Both nodes' workers ran in one world of 4 with no restart, and their agents exited 0.
  void expect_clean_run(std::vector<std::unique_ptr<ChildProcess>>& nodes) {
    release("release.fifo", 4);
    const auto runs = finish_all(nodes, deadline_after(30s));
    for (size_t i = 0; i < runs.size(); ++i) {
      EXPECT_TRUE(ExitedWith(runs[i], 0)) << "node " << i + 1 << ": " << runs[i].describe();
    }
    std::set<std::string> ranks;
    for (const auto& [name, m] : markers("run_n")) {
      EXPECT_EQ(m["WORLD_SIZE"], "4") << name;
      EXPECT_EQ(m["TORCHELASTIC_RESTART_COUNT"], "0") << name;
      ranks.insert(m["RANK"].get<std::string>());
    }
    EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  }
};

TEST_F(AuthTest, TheDaemonServesTokenHoldersAndTurnsAwayTheRest) {
  const std::string secret = "5f4dcc3b5aa765d61d8327deb882cf99";
  const std::string token = token_file("job", secret);
  std::string endpoint;
  auto daemon = start_daemon(&endpoint, {"--token-file", token});
  ASSERT_NE(daemon, nullptr);
  make_fifo(out("release.fifo"));
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    nodes.push_back(start_node(node(n, endpoint, "token_file=" + token)));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(40s)));

  // While the job runs: a node with another token, and one with none.
  const std::string wrong = token_file("wrong", "00000000000000000000000000000000");
  auto impostor = start_node(node(3, endpoint, "token_file=" + wrong));
  auto anonymous = start_node(node(4, endpoint, ""));
  ASSERT_NE(impostor, nullptr);
  ASSERT_NE(anonymous, nullptr);
  const RunResult refused = finish(*impostor, deadline_after(20s));
  const RunResult unnamed = finish(*anonymous, deadline_after(20s));
  EXPECT_FALSE(ExitedWith(refused, 0));
  EXPECT_NE(refused.err.find("authentication failed for job authjob"), std::string::npos)
      << refused.describe();
  EXPECT_NE(refused.err.find("token_file"), std::string::npos) << refused.describe();
  EXPECT_FALSE(ExitedWith(unnamed, 0));
  EXPECT_NE(unnamed.err.find("requires a token"), std::string::npos) << unnamed.describe();
  EXPECT_TRUE(markers("run_n3").empty() && markers("run_n4").empty());

  expect_clean_run(nodes);
  daemon->send_signal(SIGTERM);
  const RunResult d = finish(*daemon, deadline_after(10s));
  EXPECT_TRUE(ExitedWith(d, 0)) << d.describe();
  EXPECT_NE(d.err.find("authentication failed for job authjob from 127.0.0.3"), std::string::npos)
      << d.describe();
  EXPECT_NE(d.err.find("authentication failed for job authjob from 127.0.0.4"), std::string::npos)
      << d.describe();
}

TEST_F(AuthTest, AHostingAgentServesMutualTlsWithAToken) {
  rdzv::testing::TestPki pki;
  const std::string token = token_file("job", "0123456789abcdef0123456789abcdef");
  // Every node presents the same certificate (valid for 127.0.0.1, both uses); the hosting
  // agent serves with it and checks the others' against the CA.
  const std::string conf = "token_file=" + token + ",tls_ca_file=" + pki.cert("ca") +
                           ",tls_cert_file=" + pki.cert("server") +
                           ",tls_key_file=" + pki.key("server");
  const std::string endpoint = node_addr(1) + ":" + std::to_string(free_port(node_addr(1)));
  make_fifo(out("release.fifo"));
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    nodes.push_back(start_node(node(n, endpoint, conf)));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(40s)));

  // Without a client certificate from the CA, a node is refused by TLS itself.
  auto no_cert =
      start_node(node(3, endpoint, "token_file=" + token + ",tls_ca_file=" + pki.cert("ca")));
  ASSERT_NE(no_cert, nullptr);
  const RunResult refused = finish(*no_cert, deadline_after(20s));
  EXPECT_FALSE(ExitedWith(refused, 0));
  EXPECT_NE(refused.err.find("authentication failed for job authjob"), std::string::npos)
      << refused.describe();
  expect_clean_run(nodes);
}

}  // namespace
}  // namespace ddprun::testing
