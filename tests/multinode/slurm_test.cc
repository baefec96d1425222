// ddprun under SLURM, with srun's environment faked on loopback hosts: a real two-node job
// that configures itself from SLURM_* alone (no rendezvous flag anywhere), and SLURM's
// pre-emption signal (SIGUSR1) reaching the workers while the job goes on.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include "tests/integration/test_files.h"
#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class SlurmTest : public MultinodeTest {
 protected:
  // What slurmstepd gives the task on node `node_id` of a step on 127.0.0.[1-<nodes>]; the
  // rendezvous port is the step's reserved port (srun --resv-ports), free on this machine.
  std::map<std::string, std::string> slurm_env(int node_id, int nodes, uint16_t port) const {
    std::map<std::string, std::string> env = env_;
    env["SLURM_JOB_ID"] = "777";
    env["SLURM_JOBID"] = "777";
    env["SLURM_STEP_ID"] = "0";
    env["SLURM_NODEID"] = std::to_string(node_id);
    env["SLURM_PROCID"] = std::to_string(node_id);
    env["SLURM_LOCALID"] = "0";
    env["SLURM_NNODES"] = std::to_string(nodes);
    env["SLURM_JOB_NUM_NODES"] = std::to_string(nodes);
    env["SLURM_JOB_NODELIST"] =
        nodes == 1 ? "127.0.0.1" : "127.0.0.[1-" + std::to_string(nodes) + "]";
    env["SLURMD_NODENAME"] = node_addr(node_id + 1);
    env["SLURM_STEP_RESV_PORTS"] = std::to_string(port);
    return env;
  }
  std::unique_ptr<ChildProcess> start_slurm_task(int node_id,
                                                 std::map<std::string, std::string> env,
                                                 const std::vector<std::string>& args) {
    const auto saved = env_;
    env_ = std::move(env);
    auto task = start_node_args(node_id + 1, args);
    env_ = saved;
    return task;
  }
};

TEST_F(SlurmTest, TwoNodeJobFromSlurmsEnvironmentAlone) {
  const uint16_t port = free_port("127.0.0.1");
  auto first = slurm_env(0, 2, port);
  first["SLURM_GPUS_ON_NODE"] = "2";  // workers per node: the node's GPUs ...
  auto second = slurm_env(1, 2, port);
  second["SLURM_NTASKS_PER_NODE"] = "2";  // ... or the tasks per node
  const std::vector<std::string> entry{mn_worker("hold.py"), "--exit-when-world", "4"};
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  nodes.push_back(start_slurm_task(1, second, entry));  // order does not matter
  nodes.push_back(start_slurm_task(0, first, entry));
  ASSERT_NE(nodes[0], nullptr);
  ASSERT_NE(nodes[1], nullptr);
  const auto runs = finish_all(nodes, deadline_after(60s));
  for (const auto& run : runs) ASSERT_TRUE(ExitedWith(run, 0));

  const auto run_markers = markers("run_");
  ASSERT_EQ(run_markers.size(), 4u);
  for (const auto& [name, m] : run_markers) {
    const int node = std::stoi(m.at("node").get<std::string>());
    EXPECT_EQ(m.at("WORLD_SIZE"), "4") << name;
    EXPECT_EQ(m.at("LOCAL_WORLD_SIZE"), "2") << name;
    EXPECT_EQ(m.at("GROUP_WORLD_SIZE"), "2") << name;
    EXPECT_EQ(m.at("GROUP_RANK"), std::to_string(node - 1)) << name;  // SLURM_NODEID's order
    EXPECT_EQ(m.at("TORCHELASTIC_RUN_ID"), "slurm-777.0") << name;
    EXPECT_EQ(m.at("MASTER_ADDR"), "127.0.0.1") << name;  // node 0's SLURMD_NODENAME
    EXPECT_EQ(m.at("TORCHELASTIC_RESTART_COUNT"), "0") << name;
  }
  // Each node said, in one line, what it took from SLURM.
  const std::string endpoint = "--rdzv_endpoint 127.0.0.1:" + std::to_string(port);
  for (int i = 0; i < 2; ++i) {
    const std::string& err = runs[i].err;
    EXPECT_EQ(count_of(err, "SLURM job 777"), 1) << err;
    EXPECT_NE(err.find(endpoint), std::string::npos) << err;
    EXPECT_NE(err.find("--nnodes 2 (SLURM_NNODES)"), std::string::npos) << err;
  }
  EXPECT_NE(runs[0].err.find("--nproc_per_node 2 (SLURM_NTASKS_PER_NODE)"), std::string::npos);
  EXPECT_NE(runs[1].err.find("--nproc_per_node 2 (SLURM_GPUS_ON_NODE)"), std::string::npos);
}

TEST_F(SlurmTest, PreemptionSignalReachesTheWorkersAndTheJobGoesOn) {
  auto env = slurm_env(0, 1, free_port("127.0.0.1"));
  env["SLURM_NTASKS_PER_NODE"] = "2";
  make_fifo(out("release"));
  auto task =
      start_slurm_task(0, env, {mn_worker("service_worker.py"), "--release", out("release")});
  ASSERT_NE(task, nullptr);
  // Both workers have their handler installed before they write this marker.
  ASSERT_TRUE(wait_for_markers("svc_", 2, deadline_after(30s))) << task->stderr_text();

  // No service manager: libsystemd (six libraries, ~1 MB of RSS) is not even loaded.
  EXPECT_EQ(read_text_file("/proc/" + std::to_string(task->pid()) + "/maps").find("libsystemd"),
            std::string::npos);

  task->send_signal(SIGUSR1);  // as `srun --signal=USR1@120` would, to ddprun
  ASSERT_TRUE(wait_for_markers("usr_", 2, deadline_after(20s))) << task->stderr_text();
  task->send_signal(SIGUSR2);
  ASSERT_TRUE(wait_for_markers("usr_", 4, deadline_after(20s))) << task->stderr_text();
  for (int rank : {0, 1}) {
    const std::string prefix = "usr_n1_l" + std::to_string(rank) + "_";
    EXPECT_EQ(markers(prefix + "1").begin()->second, SIGUSR1);
    EXPECT_EQ(markers(prefix + "2").begin()->second, SIGUSR2);
  }

  release("release", 2);  // the workers go on to finish: no restart, exit 0
  const RunResult run = finish(*task, deadline_after(30s));
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(markers("svc_").size(), 2u);  // the same two workers, never restarted
  EXPECT_NE(run.err.find("received SIGUSR1: forwarded to 2 worker groups; the job goes on"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("--signals_to_forward SIGUSR1,SIGUSR2 (srun)"), std::string::npos)
      << run.err;
}

// configs/slurm/ddprun.sbatch as sbatch runs it, with an `srun` on PATH that, like srun for a
// one-node step, runs its command (the test fakes the step's environment).
TEST_F(SlurmTest, TheSbatchScriptRunsAJobFromSrunsEnvironment) {
  const std::string bin = temp() / "bin";
  ASSERT_EQ(::mkdir(bin.c_str(), 0755), 0);
  write_text_file(bin + "/srun",
                  "#!/bin/sh\n"
                  "# srun's own options, then the command\n"
                  "while [ \"${1#--}\" != \"$1\" ]; do shift; done\n"
                  "exec \"$@\"\n",
                  0755);
  ASSERT_EQ(::symlink(ddprun_binary().c_str(), (bin + "/ddprun").c_str()), 0);
  auto env = slurm_env(0, 1, free_port("127.0.0.1"));
  env["SLURM_NTASKS_PER_NODE"] = "2";
  env["PATH"] = bin + ":" + env["PATH"];
  const auto saved = env_;
  env_ = env;
  ChildOptions options;
  options.executable = "/bin/bash";
  options.args = {std::string(DDPRUN_SOURCE_DIR) + "/configs/slurm/ddprun.sbatch",
                  mn_worker("hold.py"), "--exit-when-world", "2"};
  options.env = env_;
  options.cwd = temp().path();
  env_ = saved;
  auto script = ChildProcess::start(options);
  ASSERT_TRUE(script) << script.error_message();
  const RunResult run = finish(**script, deadline_after(60s));
  ASSERT_TRUE(ExitedWith(run, 0));
  const auto run_markers = markers("run_");
  ASSERT_EQ(run_markers.size(), 2u);
  for (const auto& [name, m] : run_markers) {
    EXPECT_EQ(m.at("TORCHELASTIC_RUN_ID"), "slurm-777.0") << name;
  }
  EXPECT_NE(run.err.find("SLURM job 777 step 0, node 0 of 1"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace ddprun::testing
