// Real torch clients, torch 1.13 (Debian's python3-torch) and 2.x (the project's virtual
// environment; test_python.h), against the store, served in-process on a loop thread as the
// agent serves it: the Python TCPStore API query by query, and a 2-rank
// gloo job whose env:// rendezvous uses the store (TORCHELASTIC_USE_AGENT_STORE=True) and
// whose rank 0 exits while rank 1 still uses the store. Imports torch in each child (about a
// second each); every wait is bounded, and the children die with the test.
#include "tests/integration/process_harness.h"
#include "tests/integration/test_python.h"
#include "tests/store/store_test_util.h"

namespace ddprun::store::testing {
namespace {

using ddprun::testing::ChildExit;
using ddprun::testing::ChildOptions;
using ddprun::testing::ChildProcess;
using ddprun::testing::deadline_after;

class TorchClientTest : public ::testing::Test {
 protected:
  // The test's environment without anything a launcher or a torch run may have set.
  static std::map<std::string, std::string> base_env() {
    std::map<std::string, std::string> env;
    for (const auto& [key, value] : ddprun::testing::current_environment()) {
      if (key.rfind("PET_", 0) == 0 || key.rfind("TORCHELASTIC_", 0) == 0 ||
          key.rfind("PYTHON", 0) == 0 || key.rfind("MASTER_", 0) == 0 || key == "RANK" ||
          key == "WORLD_SIZE" || key == "LOCAL_RANK" || key == "OMP_NUM_THREADS") {
        continue;
      }
      env[key] = value;
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1";
    env["OMP_NUM_THREADS"] = "1";
    env["GLOO_SOCKET_IFNAME"] = "lo";  // loopback only
    return env;
  }

  std::unique_ptr<ChildProcess> python(const std::string& script, std::vector<std::string> args,
                                       std::map<std::string, std::string> env = base_env()) {
    ChildOptions options;
    options.executable = ddprun::testing::test_python();
    options.args = {"-u", std::string(DDPRUN_SOURCE_DIR) + "/tests/store/python/" + script};
    options.args.insert(options.args.end(), args.begin(), args.end());
    options.env = std::move(env);
    auto child = ChildProcess::start(options);
    EXPECT_TRUE(child.ok()) << child.error_message();
    return child.ok() ? std::move(child.value()) : nullptr;
  }

  static std::string output(ChildProcess& child) {
    return "stdout:\n" + child.stdout_text() + "\nstderr:\n" + child.stderr_text();
  }

  StoreThread store_;
};

TEST_F(TorchClientTest, PythonTcpStoreEveryQuery) {
  auto child = python("tcpstore_client.py", {"127.0.0.1", std::to_string(store_.port())});
  ASSERT_TRUE(child);
  const std::optional<ChildExit> exit = child->wait(deadline_after(90s));
  ASSERT_TRUE(exit) << "still running after 90 s\n" << output(*child);
  EXPECT_EQ(exit->code, 0) << output(*child);
  EXPECT_NE(child->stdout_text().find("tcpstore client ok"), std::string::npos) << output(*child);

  // Nothing was refused; the waits and barriers it abandoned on timeout died with their
  // connections (1.13) or were cancelled (2.x).
  EXPECT_TRUE(store_.stats_until(
      [](const StoreStats& s) { return s.connections_open == 0 && s.pending_waits == 0; }));
  const StoreStats s = store_.stats();
  EXPECT_EQ(s.protocol_errors, 0u);
  EXPECT_EQ(s.limit_refusals, 0u);
  if (ddprun::testing::test_torch_major() == 1) {
    // Both of the script's clients spoke the legacy dialect.
    EXPECT_EQ(s.connections_legacy, 2u);
    EXPECT_EQ(s.connections_validated, 0u);
    EXPECT_EQ(s.ops(Op::kCompareSet), 4u);
    EXPECT_EQ(s.ops(Op::kDeleteKey), 2u);
    EXPECT_EQ(s.keys, 5u);  // init/, k, n, blob, late
    return;
  }
  // torch 2.x: four clients (the first two, one with use_libuv each way), all validated, and
  // every query type of the 2.x Python API was served.
  EXPECT_EQ(s.connections_legacy, 0u);
  EXPECT_EQ(s.connections_validated, 4u);
  for (Op op : {Op::kSet, Op::kGet, Op::kAdd, Op::kCompareSet, Op::kCheck, Op::kWait, Op::kNumKeys,
                Op::kDeleteKey, Op::kAppend, Op::kMultiGet, Op::kMultiSet, Op::kCancelWait,
                Op::kQueuePush, Op::kQueuePop, Op::kQueueLen, Op::kListKeys, Op::kBarrier}) {
    EXPECT_GT(s.ops(op), 0u) << op_name(op);
  }
  EXPECT_EQ(s.ops(Op::kListKeys), 2u);
  EXPECT_EQ(s.ops(Op::kBarrier), 8u);  // per client: 2 that meet, 1 late, 1 that times out
}

TEST_F(TorchClientTest, GlooJobOnTheStoreOutlivesRankZero) {
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    auto env = base_env();
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = std::to_string(store_.port());
    env["RANK"] = std::to_string(rank);
    env["LOCAL_RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = "2";
    env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    env["TORCHELASTIC_RESTART_COUNT"] = "0";
    ranks.push_back(python("pg_worker.py", {}, env));
    ASSERT_TRUE(ranks.back());
  }
  const std::optional<ChildExit> rank0 = ranks[0]->wait(deadline_after(90s));
  ASSERT_TRUE(rank0) << "rank 0 still running after 90 s\n" << output(*ranks[0]);
  ASSERT_EQ(rank0->code, 0) << output(*ranks[0]);
  EXPECT_NE(ranks[0]->stdout_text().find("rank 0 all_reduce 3.0"), std::string::npos)
      << output(*ranks[0]);

  // Rank 0 is gone and reaped; rank 1 goes on with the store only now.
  auto test_client = TestClient::connect(store_.port(), Dialect::kLegacy);
  ASSERT_TRUE(test_client);
  test_client->set("/rank0_gone", "1");
  const std::optional<ChildExit> rank1 = ranks[1]->wait(deadline_after(60s));
  ASSERT_TRUE(rank1) << "rank 1 still running after 60 s\n" << output(*ranks[1]);
  EXPECT_EQ(rank1->code, 0) << output(*ranks[1]);
  EXPECT_NE(ranks[1]->stdout_text().find("rank 1 all_reduce 3.0"), std::string::npos);
  EXPECT_NE(ranks[1]->stdout_text().find("rank 1 store ok"), std::string::npos)
      << output(*ranks[1]);

  const StoreStats s = store_.stats();
  EXPECT_EQ(s.protocol_errors, 0u);
  if (ddprun::testing::test_torch_major() == 1) {
    EXPECT_EQ(s.connections_validated, 0u);
    EXPECT_GE(s.connections_legacy, 4u);  // one per rank, rank 1's fresh client, the test's
  } else {
    EXPECT_GE(s.connections_validated, 3u);  // one per rank, rank 1's fresh client
    EXPECT_EQ(s.connections_legacy, 1u);     // the test's own
  }
  // gloo's rendezvous went through the store: its addresses are set, waited for and read.
  EXPECT_GT(s.ops(Op::kSet), 2u);
  EXPECT_GT(s.ops(Op::kGet), 0u);
  EXPECT_GT(s.ops(Op::kWait), 0u);
}

}  // namespace
}  // namespace ddprun::store::testing
