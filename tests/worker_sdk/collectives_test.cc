// Every collective and point-to-point helper across 2 and 3 real processes, and the error
// model (a peer that never answers, named rank and operation).
#include <gtest/gtest.h>

#include "tests/worker_sdk/multiproc.h"

namespace ddp_test {
namespace {

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (auto pos = text.find(part); pos != std::string::npos; pos = text.find(part, pos + 1)) ++n;
  return n;
}

void run_collectives(int world) {
  TempDir dir;
  auto results = run_ranks(SDK_TEST_WORKER, {"collectives"}, world, dir.path());
  std::string joined;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << all_output(results);
    joined += r.output;
  }
  // print_primary prints on rank 0 only.
  EXPECT_EQ(count(joined, "collectives ok on " + std::to_string(world) + " ranks"), 1) << joined;
  EXPECT_NE(results[0].output.find("collectives ok"), std::string::npos);
}

TEST(CollectivesTest, TwoRanks) { run_collectives(2); }
TEST(CollectivesTest, ThreeRanks) { run_collectives(3); }

TEST(CollectivesTest, TimeoutsAndLostPeersRaiseErrorsNamingRankAndOperation) {
  TempDir dir;
  RunOptions options;
  options.deadline = std::chrono::seconds(40);
  auto results = run_ranks(SDK_TEST_WORKER, {"errors", "timeout_ms=1500"}, 2, dir.path(), options);
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << all_output(results);
  EXPECT_NE(results[0].output.find("error: ddp rank 0: all_reduce"), std::string::npos)
      << all_output(results);
  EXPECT_NE(results[1].output.find("error: ddp rank 1: recv from rank 0"), std::string::npos)
      << all_output(results);
}

// destroy_process_group waits for every rank; with a worker-hosted store (ddprun's) rank 0
// also waits until the others have left the store.
TEST(DestroyTest, RankZeroReturnsOnlyAfterEveryRankArrivedWorkerHostedStore) {
  TempDir dir;
  RunOptions options;
  options.rank_zero_hosts_store = true;  // the path under test
  auto results =
      run_ranks(SDK_TEST_WORKER, {"destroy", "dir=" + dir.path().string()}, 3, dir.path(), options);
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << all_output(results);
  EXPECT_NE(results[0].output.find("destroy ok (agent store: 0)"), std::string::npos);
}

// With torchrun 1.13's static rendezvous the agent hosts the store
// (TORCHELASTIC_USE_AGENT_STORE=True): every rank is a client; the same program ends cleanly.
TEST(DestroyTest, RankZeroReturnsOnlyAfterEveryRankArrivedAgentHostedStore) {
  const std::filesystem::path torchrun = TORCHRUN_WRAPPER;
  if (!std::filesystem::exists(torchrun) || !std::filesystem::exists(DDPRUN_TEST_PYTHON)) {
    GTEST_SKIP() << "no torchrun wrapper at " << torchrun;
  }
  TempDir dir;
  ProcessSpec spec;
  spec.argv = {DDPRUN_TEST_PYTHON,
               torchrun.string(),
               "--nnodes",
               "1",
               "--nproc_per_node",
               "2",
               "--master_addr",
               "127.0.0.1",
               "--master_port",
               std::to_string(free_port()),
               "--monitor_interval",
               "0.2",
               "--no_python",
               SDK_TEST_WORKER,
               "destroy",
               "dir=" + dir.path().string()};
  spec.env["OMP_NUM_THREADS"] = "1";
  spec.env["TMPDIR"] = dir.path().string();  // torchrun leaves its log directory behind
  spec.output_file = dir.path() / "torchrun.log";
  auto results = run_processes({spec});
  ASSERT_TRUE(results[0].ok()) << results[0].output;
  EXPECT_NE(results[0].output.find("destroy ok (agent store: 1)"), std::string::npos)
      << results[0].output;
}

TEST(InitTest, MissingMasterPortIsAClearError) {
  TempDir dir;
  ProcessSpec spec;
  spec.argv = {SDK_TEST_WORKER, "collectives"};
  spec.env = {{"RANK", "0"}, {"WORLD_SIZE", "2"}};
  spec.output_file = dir.path() / "out.log";
  auto results = run_processes({spec});
  EXPECT_EQ(results[0].exit_code, 1);
  EXPECT_NE(results[0].output.find("read_launch_env: MASTER_PORT is not set"), std::string::npos)
      << results[0].output;
}

}  // namespace
}  // namespace ddp_test
