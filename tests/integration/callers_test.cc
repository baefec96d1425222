// What real callers hand torchrun, run for real: the NCCL variables follow the workers' torch,
// --virtual-local-rank, an empty --role, torchrun 2.x's log line template and duplicate
// filters, --numa-binding on this machine's CPUs, workers' stdin, and a worker stopped by job
// control.
#include <csignal>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/integration/ddprun_fixture.h"

namespace ddprun::testing {
namespace {

using Env = std::map<std::string, std::string>;

class CallersTest : public DdprunTest {
 protected:
  // What worker `name` (its local rank, or "r<rank>" with --by-rank) saw.
  Env worker_env(const std::string& name) {
    const std::string text = read_text_file(out("env_0_" + name + ".json"));
    return text.empty() ? Env{} : nlohmann::json::parse(text).get<Env>();
  }
};

TEST_F(CallersTest, NcclVariablesFollowTheWorkersTorchAndKeepTheUsersValue) {
  // Python workers import Debian's torch 1.13, which reads only the old name.
  env_["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0";
  ASSERT_TRUE(ExitedWith(run_ddprun({"--nproc_per_node", "1", worker("dump_env.py")}), 0));
  Env torch1 = worker_env("0");
  EXPECT_EQ(torch1.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "0");
  EXPECT_EQ(torch1.at("NCCL_ASYNC_ERROR_HANDLING"), "0");
  // An executable's torch is unknown: only the current name, and torchrun's default 1.
  env_.erase("TORCH_NCCL_ASYNC_ERROR_HANDLING");
  ASSERT_TRUE(ExitedWith(
      run_ddprun({"--nproc_per_node", "1", "--no_python", python(), worker("dump_env.py")}), 0));
  Env binary = worker_env("0");
  EXPECT_EQ(binary.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
  EXPECT_EQ(binary.count("NCCL_ASYNC_ERROR_HANDLING"), 0u);
}

TEST_F(CallersTest, VirtualLocalRankShowsEachWorkerItsGpuAsDeviceZero) {
  env_["CUDA_VISIBLE_DEVICES"] = "3,5";
  ASSERT_TRUE(ExitedWith(run_ddprun({"--virtual-local-rank", "--nproc_per_node", "2",
                                     worker("dump_env.py"), "--by-rank"}),
                         0));
  for (int local = 0; local < 2; ++local) {
    const Env e = worker_env("r" + std::to_string(local));
    ASSERT_FALSE(e.empty());
    EXPECT_EQ(e.at("LOCAL_RANK"), "0");
    EXPECT_EQ(e.at("RANK"), std::to_string(local));
    EXPECT_EQ(e.at("CUDA_VISIBLE_DEVICES"), local == 0 ? "3" : "5");
  }
}

TEST_F(CallersTest, AnEmptyRoleAsTorchXPassesIt) {
  const RunResult run =
      run_ddprun({"--role", "", "--tee", "1", "--nproc_per_node", "2", worker("dump_env.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(worker_env("1").at("ROLE_NAME"), "");
  const RunResult printed = run_ddprun(
      {"--role", "", "--tee", "1", "--nproc_per_node", "1", worker("print_lines.py"), "hello"});
  ASSERT_TRUE(ExitedWith(printed, 0));
  EXPECT_NE(printed.out.find("[0]:hello\n"), std::string::npos) << printed.out;
}

TEST_F(CallersTest, LinePrefixTemplateAndDuplicateFilters) {
  const std::string logs = temp().path() + "/logs";
  const RunResult run =
      run_ddprun({"--tee", "1", "--nproc_per_node", "2", "--log-dir", logs, "--rdzv_id", "dup",
                  "--log-line-prefix-template", "${role_name}/${rank}> ",
                  "--duplicate-stdout-filters", "loss,,a,NaN", worker("print_lines.py"),
                  "step 1 loss,a 0.5", "step 2 ok", "step 3 NaN seen"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_NE(run.out.find("default/1> step 2 ok\n"), std::string::npos) << run.out;
  const auto runs = list_dir(logs);
  ASSERT_EQ(runs.size(), 1u);
  const std::string filtered =
      read_text_file(logs + "/" + runs[0] + "/attempt_0/filtered_stdout.log");
  std::set<std::string> lines;
  std::istringstream in(filtered);
  for (std::string line; std::getline(in, line);) lines.insert(line);
  EXPECT_EQ(lines,
            (std::set<std::string>{"default/0> step 1 loss,a 0.5", "default/0> step 3 NaN seen",
                                   "default/1> step 1 loss,a 0.5", "default/1> step 3 NaN seen"}))
      << filtered;
}

TEST_F(CallersTest, NumaBindingExclusiveGivesWorkersDisjointCpus) {
  const RunResult run =
      run_ddprun({"--numa-binding", "exclusive", "--nproc_per_node", "2", worker("affinity.py")});
  if (run.exit && run.exit->code == 2) {
    // A machine with a single physical core cannot give two workers one each.
    EXPECT_NE(run.err.find("physical cores for 2 workers"), std::string::npos) << run.describe();
    GTEST_SKIP() << "fewer than two physical cores here";
  }
  ASSERT_TRUE(ExitedWith(run, 0));
  std::set<std::string> seen;
  for (int local = 0; local < 2; ++local) {
    const std::string cpus = read_text_file(out("affinity_" + std::to_string(local)));
    ASSERT_FALSE(cpus.empty());
    std::istringstream in(cpus);
    for (std::string cpu; std::getline(in, cpu, ',');) {
      EXPECT_TRUE(seen.insert(cpu).second) << "CPU " << cpu << " given to both workers";
    }
  }
  EXPECT_NE(run.err.find("local rank 1 runs on CPUs"), std::string::npos) << run.err;
}

TEST_F(CallersTest, WorkersReadEndOfFileNotTheTerminal) {
  const RunResult run = run_ddprun({"--nproc_per_node", "2", worker("read_stdin.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(read_text_file(out("stdin_0")), "eof");
  EXPECT_EQ(read_text_file(out("stdin_1")), "eof");
}

TEST_F(CallersTest, AWorkerStoppedByJobControlFailsTheJobInsteadOfHangingIt) {
  const RunResult run = run_ddprun({"--nproc_per_node", "2", worker("stop_self.py"), "SIGTTIN"});
  ASSERT_TRUE(ExitedWith(run, 128 + SIGTTIN));
  EXPECT_NE(run.err.find("Signal 21 (SIGTTIN) stopped PID"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("rank      : 1"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace ddprun::testing
