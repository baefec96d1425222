// The worker environment contract: every variable torchrun sets, with its value, for two
// workers; OMP_NUM_THREADS only when unset; a free MASTER_PORT that changes on every attempt.
#include <nlohmann/json.hpp>

#include <set>

#include "tests/integration/ddprun_fixture.h"

namespace ddprun::testing {
namespace {

using Env = std::map<std::string, std::string>;

class EnvContractTest : public DdprunTest {
 protected:
  // The environment worker `local_rank` saw on restart `restart` (empty if it wrote none).
  Env worker_env(int restart, int local_rank) {
    const std::string text = read_text_file(
        out("env_" + std::to_string(restart) + "_" + std::to_string(local_rank) + ".json"));
    if (text.empty()) return {};
    return nlohmann::json::parse(text).get<Env>();
  }
  // Runs two attempts of dump_env.py (the first fails once both workers have written) with
  // `probe` for rank 0, and checks what both attempts share; returns their MASTER_PORTs.
  std::set<std::string> run_two_attempts(const std::string& probe) {
    make_fifo(out("done_0.fifo"));
    const RunResult run = run_ddprun({"--nproc_per_node", "2", "--max_restarts", "1",
                                      worker("dump_env.py"), "--fail-first-attempt", probe});
    EXPECT_TRUE(ExitedWith(run, 0));
    std::set<std::string> ports;
    for (int restart = 0; restart < 2; ++restart) {
      SCOPED_TRACE("restart " + std::to_string(restart));
      const Env e0 = worker_env(restart, 0), e1 = worker_env(restart, 1);
      if (e0.empty() || e1.empty()) {
        ADD_FAILURE() << "attempt " << restart << " wrote no environment";
        continue;
      }
      EXPECT_EQ(e0.at("TORCHELASTIC_RESTART_COUNT"), std::to_string(restart));
      EXPECT_EQ(e1.at("TORCHELASTIC_RESTART_COUNT"), std::to_string(restart));
      EXPECT_EQ(e0.at("TORCHELASTIC_MAX_RESTARTS"), "1");
      EXPECT_EQ(e0.at("MASTER_PORT"), e1.at("MASTER_PORT"));
      EXPECT_NE(e0.at("TORCHELASTIC_ERROR_FILE").find("/attempt_" + std::to_string(restart) + "/"),
                std::string::npos);
      ports.insert(e0.at("MASTER_PORT"));
    }
    return ports;
  }
};

TEST_F(EnvContractTest, TwoWorkersGetEveryTorchrunVariable) {
  const RunResult run = run_ddprun(
      {"--nproc_per_node", "2", "--rdzv_id", "job7", "--max_restarts", "3", worker("dump_env.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  const Env e0 = worker_env(0, 0), e1 = worker_env(0, 1);
  ASSERT_FALSE(e0.empty());
  ASSERT_FALSE(e1.empty());
  for (int rank = 0; rank < 2; ++rank) {
    const Env& e = rank == 0 ? e0 : e1;
    SCOPED_TRACE("local rank " + std::to_string(rank));
    const std::string r = std::to_string(rank);
    EXPECT_EQ(e.at("LOCAL_RANK"), r);
    EXPECT_EQ(e.at("RANK"), r);
    EXPECT_EQ(e.at("GROUP_RANK"), "0");
    EXPECT_EQ(e.at("ROLE_RANK"), r);
    EXPECT_EQ(e.at("ROLE_NAME"), "default");
    EXPECT_EQ(e.at("LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(e.at("WORLD_SIZE"), "2");
    EXPECT_EQ(e.at("GROUP_WORLD_SIZE"), "1");
    EXPECT_EQ(e.at("ROLE_WORLD_SIZE"), "2");
    EXPECT_EQ(e.at("MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(e.at("TORCHELASTIC_RESTART_COUNT"), "0");
    EXPECT_EQ(e.at("TORCHELASTIC_MAX_RESTARTS"), "3");
    EXPECT_EQ(e.at("TORCHELASTIC_RUN_ID"), "job7");
    EXPECT_EQ(e.at("TORCHELASTIC_USE_AGENT_STORE"), "True");  // the agent hosts the store
    EXPECT_EQ(e.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
    EXPECT_EQ(e.at("NCCL_ASYNC_ERROR_HANDLING"), "1");
    EXPECT_EQ(e.at("OMP_NUM_THREADS"), "1");
    // The error file sits in the run's log directory, which defaults to one under $TMPDIR.
    const std::string error_file = e.at("TORCHELASTIC_ERROR_FILE");
    EXPECT_EQ(error_file.rfind(env_.at("TMPDIR") + "/", 0), 0u) << error_file;
    EXPECT_NE(error_file.find("/attempt_0/" + r + "/error.json"), std::string::npos) << error_file;
    // The agent's own environment is passed on.
    EXPECT_EQ(e.at("DDPRUN_TEST_OUT"), out_dir());
  }
  const int port = std::stoi(e0.at("MASTER_PORT"));
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_EQ(e0.at("MASTER_PORT"), e1.at("MASTER_PORT"));
  EXPECT_NE(e0.at("TORCHELASTIC_ERROR_FILE"), e1.at("TORCHELASTIC_ERROR_FILE"));
  EXPECT_NE(run.err.find("OMP_NUM_THREADS"), std::string::npos) << "no warning:\n" << run.err;
}

TEST_F(EnvContractTest, RoleFlagNamesTheRole) {
  const RunResult run =
      run_ddprun({"--nproc-per-node=2", "--role", "trainer", worker("dump_env.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(worker_env(0, 1)["ROLE_NAME"], "trainer");
  EXPECT_EQ(worker_env(0, 1)["TORCHELASTIC_RUN_ID"], "none");  // torchrun's --rdzv_id default
}

TEST_F(EnvContractTest, OmpNumThreadsIsKeptWhenSet) {
  env_["OMP_NUM_THREADS"] = "4";
  const RunResult run = run_ddprun({"--nproc_per_node", "2", worker("dump_env.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(worker_env(0, 0)["OMP_NUM_THREADS"], "4");
  EXPECT_EQ(worker_env(0, 1)["OMP_NUM_THREADS"], "4");
  EXPECT_EQ(run.err.find("OMP_NUM_THREADS"), std::string::npos) << run.err;
}

TEST_F(EnvContractTest, OmpNumThreadsIsNotSetForASingleWorker) {
  const RunResult run = run_ddprun({"--nproc_per_node", "1", worker("dump_env.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  const Env e = worker_env(0, 0);
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.count("OMP_NUM_THREADS"), 0u);
  EXPECT_EQ(run.err.find("OMP_NUM_THREADS"), std::string::npos) << run.err;
}

TEST_F(EnvContractTest, PetVariablesSetFlagDefaults) {
  env_["PET_NPROC_PER_NODE"] = "3";
  const RunResult run = run_ddprun({worker("dump_env.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(worker_env(0, 2)["WORLD_SIZE"], "3");
}

TEST_F(EnvContractTest, TheAgentsStoreListensBeforeWorkersStartOnAFreshPortEveryAttempt) {
  const auto ports = run_two_attempts("--connect-master-port");
  EXPECT_EQ(ports.size(), 2u) << "MASTER_PORT was reused across attempts";
  for (int restart = 0; restart < 2; ++restart) {
    Env e0 = worker_env(restart, 0);
    EXPECT_EQ(e0["TORCHELASTIC_USE_AGENT_STORE"], "True");
    EXPECT_EQ(e0["__connect_master_port"], "ok") << "restart " << restart;
  }
}

// torchrun's escape hatch for workers that insist on hosting their own store.
TEST_F(EnvContractTest, WithTheStoreNotSharedRankZeroGetsAFreePortEveryAttempt) {
  env_["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1";
  const auto ports = run_two_attempts("--bind-master-port");
  EXPECT_EQ(ports.size(), 2u) << "MASTER_PORT was reused across attempts";
  for (int restart = 0; restart < 2; ++restart) {
    Env e0 = worker_env(restart, 0);
    EXPECT_EQ(e0["TORCHELASTIC_USE_AGENT_STORE"], "False");
    // Rank 0 could host a server on it, the way torch's TCPStore does.
    EXPECT_EQ(e0["__bind_master_port"], "ok") << "restart " << restart;
  }
}

}  // namespace
}  // namespace ddprun::testing
