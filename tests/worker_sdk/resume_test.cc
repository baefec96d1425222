// Exact resume under a launcher: a worker killed with SIGKILL mid-epoch, the group restarted
// from the newest snapshot, and the final weights equal an uninterrupted run's bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <random>

#include "tests/support/test_seed.h"
#include "tests/worker_sdk/multiproc.h"
#include "tests/worker_sdk/test_models.h"

namespace ddp_test {
namespace {

namespace fs = std::filesystem;

// Runs `launcher... sdk_test_worker resume ...` and returns the final weights.
std::vector<torch::Tensor> run_job(const std::vector<std::string>& launcher, const fs::path& work,
                                   const std::vector<std::string>& extra_args,
                                   std::string* output) {
  fs::create_directories(work);
  ProcessSpec spec;
  spec.argv = launcher;
  spec.argv.push_back(SDK_TEST_WORKER);
  spec.argv.push_back("resume");
  spec.argv.push_back("dir=" + (work / "snapshots").string());
  spec.argv.push_back("out=" + (work / "final.pt").string());
  spec.argv.insert(spec.argv.end(), extra_args.begin(), extra_args.end());
  spec.env["OMP_NUM_THREADS"] = "1";
  spec.env["TMPDIR"] = work.string();  // what a launcher leaves behind (torchrun's logs) goes too
  spec.output_file = work / "launcher.log";
  RunOptions options;
  options.deadline = std::chrono::seconds(150);
  auto results = run_processes({spec}, options);
  *output = results[0].output;
  EXPECT_TRUE(results[0].ok()) << results[0].describe() << "\n" << results[0].output;
  if (!results[0].ok()) return {};
  return load_weights(work / "final.pt");
}

void expect_exact_resume(const std::vector<std::string>& launcher) {
  TempDir dir;
  std::string plain_output, killed_output;
  auto uninterrupted = run_job(launcher, dir.path() / "uninterrupted", {}, &plain_output);
  // Global step 10 is mid-epoch 1 (6 steps per epoch); the newest snapshot then is step 8.
  auto resumed =
      run_job(launcher, dir.path() / "killed", {"kill_rank=1", "kill_at=10"}, &killed_output);
  ASSERT_FALSE(uninterrupted.empty());
  ASSERT_FALSE(resumed.empty());
  EXPECT_NE(killed_output.find("rank 1 kills itself at global step 10"), std::string::npos)
      << killed_output;
  // Snapshots are written in the background: rank 0 may be stopped (rank 1's death ends the
  // group) before step 8's write is published, and then step 4 is the newest. Either way the
  // run ends bit-identical.
  EXPECT_TRUE(killed_output.find("resumed at epoch 1 step 2 (global step 8)") !=
                  std::string::npos ||
              killed_output.find("resumed at epoch 0 step 4 (global step 4)") != std::string::npos)
      << killed_output;
  ASSERT_EQ(uninterrupted.size(), resumed.size());
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed[i], uninterrupted[i]))
        << "parameter " << i << " differs by "
        << (resumed[i] - uninterrupted[i]).abs().max().item<double>();
  }
}

// Issue 37: two "nodes" of two ranks (LOCAL_RANK, LOCAL_WORLD_SIZE and GROUP_RANK as ddprun
// sets them), each node with its own snapshot directory <work>/node_<GROUP_RANK>, as on
// node-local disks. Returns the ranks' results; logs in <work>/<phase>.
std::vector<ProcessResult> run_two_nodes(const fs::path& work, const std::string& phase,
                                         const std::vector<std::string>& extra_args) {
  fs::create_directories(work / phase);
  std::vector<std::string> args = {"resume", "dir=" + (work / "node_{node}").string(),
                                   "out=" + (work / "final.pt").string(), "epochs=6"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  RunOptions options;
  options.deadline = std::chrono::seconds(150);
  options.ranks_per_node = 2;
  return run_ranks(SDK_TEST_WORKER, args, 4, work / phase, options);
}

// The node holding rank 0 is replaced by a spare with an empty directory: the job resumes at
// the newest snapshot, received from the other node, and ends bit-identical to an
// uninterrupted run; each directory keeps exactly keep_last (2) snapshots, the received copy
// counted. 6 epochs of 3 steps; snapshots every 4 steps; the first run stops after step 10.
void expect_spare_node_resumes_exactly(const std::string& background) {
  TempDir dir;
  const fs::path plain = dir.path() / "plain", lost = dir.path() / "lost";
  auto results = run_two_nodes(plain, "run", {background});
  ASSERT_TRUE(results[0].ok()) << all_output(results);
  const auto uninterrupted = load_weights(plain / "final.pt");

  results = run_two_nodes(lost, "first", {background, "stop_at=10"});
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << all_output(results);
  const std::vector<std::string> steps_4_and_8 = {"snapshot-000000000004.ddpsnap",
                                                  "snapshot-000000000008.ddpsnap"};
  EXPECT_EQ(sorted_names(lost / "node_0"), steps_4_and_8);
  EXPECT_EQ(sorted_names(lost / "node_1"), steps_4_and_8);
  fs::remove_all(lost / "node_0");  // the spare's disk is empty

  results = run_two_nodes(lost, "second", {background});
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << all_output(results);
  const std::string& out = results[0].output;
  EXPECT_NE(out.find("resumed at epoch 2 step 2 (global step 8)"), std::string::npos) << out;
  EXPECT_NE(out.find("snapshot-000000000008.ddpsnap: rank 0: missing on this rank; received "
                     "from rank 2"),
            std::string::npos)
      << out;
  const auto resumed = load_weights(lost / "final.pt");
  ASSERT_EQ(uninterrupted.size(), resumed.size());
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed[i], uninterrupted[i])) << "parameter " << i << " differs";
  }
  const std::vector<std::string> steps_12_and_16 = {"snapshot-000000000012.ddpsnap",
                                                    "snapshot-000000000016.ddpsnap"};
  EXPECT_EQ(sorted_names(lost / "node_0"), steps_12_and_16);
  EXPECT_EQ(sorted_names(lost / "node_1"), steps_12_and_16);
}

TEST(SdkNodeLocalSnapshotTest, SpareNodeResumesFromAPeersCopyBitIdenticalBackgroundWrites) {
  expect_spare_node_resumes_exactly("background=1");
}

TEST(SdkNodeLocalSnapshotTest, SpareNodeResumesFromAPeersCopyBitIdenticalSynchronousWrites) {
  expect_spare_node_resumes_exactly("background=0");
}

// The SDK's random-kill soak, short enough for CI, on node-local directories: up to five
// attempts, each killing a random rank at a later step (the others then fail on the lost peer
// and the harness kills them, mid-write or not) and, before some attempts, deleting one node's
// directory (a spare). Every attempt resumes from the newest snapshot intact on any node; the
// run that completes ends bit-identical to an uninterrupted one.
TEST(SdkNodeLocalSnapshotTest, RandomKillsAndLostDisksStillEndBitIdentical) {
  const unsigned seed = ddprun::testing::test_seed();
  SCOPED_TRACE("DDPRUN_TEST_SEED=" + std::to_string(seed));
  std::mt19937 random(seed);
  TempDir dir;
  const fs::path plain = dir.path() / "plain", soak = dir.path() / "soak";
  auto results = run_two_nodes(plain, "run", {});
  ASSERT_TRUE(results[0].ok()) << all_output(results);
  const auto uninterrupted = load_weights(plain / "final.pt");

  int kill_at = 0;
  bool completed = false;
  for (int attempt = 0; attempt < 6 && !completed; ++attempt) {
    std::vector<std::string> args;
    if (attempt < 5) {
      kill_at += 3 + static_cast<int>(random() % 3);
      args = {"kill_rank=" + std::to_string(random() % 4), "kill_at=" + std::to_string(kill_at)};
    }
    if (attempt > 0 && random() % 2 == 0) {
      fs::remove_all(soak / ("node_" + std::to_string(random() % 2)));
    }
    results = run_two_nodes(soak, "attempt_" + std::to_string(attempt), args);
    completed = std::all_of(results.begin(), results.end(), [](const auto& r) { return r.ok(); });
  }
  ASSERT_TRUE(completed) << all_output(results);
  const auto resumed = load_weights(soak / "final.pt");
  ASSERT_EQ(uninterrupted.size(), resumed.size());
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed[i], uninterrupted[i])) << "parameter " << i << " differs";
  }
}

#ifdef DDPRUN_BINARY
// Hang detection end to end: rank 1 stops before its next collective while rank 0 waits in it.
// The DDP heartbeats (sent by the SDK itself) stop; ddprun names rank 1, shows the stack it
// printed on SIGABRT, restarts the group from the newest snapshot, and the weights end equal
// to an uninterrupted run's.
TEST(ExactResumeTest, UnderDdprunAHungRankIsNamedWithItsStackAndTheRunEndsBitIdentical) {
  const std::vector<std::string> launcher = {DDPRUN_BINARY,      "--standalone",
                                             "--nproc_per_node", "2",
                                             "--max_restarts",   "1",
                                             "--hang_timeout",   "2",
                                             "--no_python"};
  TempDir dir;
  std::string plain_output, hung_output;
  auto uninterrupted = run_job(launcher, dir.path() / "uninterrupted", {}, &plain_output);
  auto resumed =
      run_job(launcher, dir.path() / "hung", {"hang_rank=1", "hang_at=10"}, &hung_output);
  ASSERT_FALSE(uninterrupted.empty());
  ASSERT_FALSE(resumed.empty());
  EXPECT_NE(hung_output.find("rank 1 stops making progress after global step 10"),
            std::string::npos)
      << hung_output;
  // Rank 1 entered step 10's collective and no further; rank 0 waits in step 11's.
  EXPECT_NE(hung_output.find("rank 1 (node "), std::string::npos) << hung_output;
  EXPECT_NE(hung_output.find("local_rank 1) hung: no progress for 2 s after step 10"),
            std::string::npos)
      << hung_output;
  EXPECT_NE(hung_output.find("stuck_before_collective"), std::string::npos)
      << "no stack in the report\n"
      << hung_output;
  EXPECT_NE(hung_output.find("resumed at epoch 1 step 2 (global step 8)"), std::string::npos)
      << hung_output;
  ASSERT_EQ(uninterrupted.size(), resumed.size());
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed[i], uninterrupted[i])) << "parameter " << i << " differs";
  }
}

// Issue 22: the hung rank reports the same step as the rank waiting for it, after it, so the
// heartbeats cannot tell them apart; the SDK's "waiting in a collective" line on SIGABRT does.
TEST(ExactResumeTest, UnderDdprunARankHungAfterItsHeartbeatIsNamedNotTheOneWaiting) {
  const std::vector<std::string> launcher = {DDPRUN_BINARY,      "--standalone",
                                             "--nproc_per_node", "2",
                                             "--max_restarts",   "1",
                                             "--hang_timeout",   "2",
                                             "--no_python"};
  TempDir dir;
  std::string output;
  run_job(launcher, dir.path() / "hung", {"hang_rank=1", "hang_at=10", "hang_beat=1"}, &output);
  EXPECT_NE(output.find("local_rank 1) hung: no progress for 2 s after step 11"), std::string::npos)
      << output;
  EXPECT_EQ(output.find("local_rank 0) hung"), std::string::npos) << "rank 0 only waited\n"
                                                                  << output;
  EXPECT_NE(output.find("*** ddp: waiting in a collective (all_reduce)"), std::string::npos)
      << output;
}

// The same across two nodes (c10d, node 1 hosting the rendezvous on 127.0.0.1, node 2 on
// 127.0.0.2): global rank 3 hangs after reporting the step the others wait in; both nodes share
// every rank's stack through the rendezvous and name rank 3 alone.
TEST(ExactResumeTest, UnderDdprunOnTwoNodesTheHungRankIsNamedByBoth) {
  TempDir dir;
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  std::vector<ProcessSpec> specs;
  for (int node = 1; node <= 2; ++node) {
    ProcessSpec spec;
    spec.argv = {DDPRUN_BINARY,
                 "--nnodes",
                 "2",
                 "--nproc_per_node",
                 "2",
                 "--rdzv_backend",
                 "c10d",
                 "--rdzv_endpoint",
                 endpoint,
                 "--rdzv_id",
                 "sdk-hang",
                 "--local_addr",
                 "127.0.0." + std::to_string(node),
                 "--hang_timeout",
                 "2",
                 "--no_python",
                 SDK_TEST_WORKER,
                 "resume",
                 "dir=" + (dir.path() / "snapshots").string(),
                 "out=" + (dir.path() / "final.pt").string(),
                 "hang_rank=3",
                 "hang_at=5",
                 "hang_beat=1"};
    spec.env["OMP_NUM_THREADS"] = "1";
    spec.env["TMPDIR"] = dir.path().string();
    spec.output_file = dir.path() / ("node" + std::to_string(node) + ".log");
    specs.push_back(std::move(spec));
  }
  RunOptions options;
  options.deadline = std::chrono::seconds(120);
  options.fail_fast = false;  // both nodes end with the hang's exit code
  const auto results = run_processes(specs, options);
  ASSERT_EQ(results.size(), 2u);
  for (const ProcessResult& node : results) {
    EXPECT_EQ(node.exit_code, 128 + SIGABRT) << node.describe() << "\n" << node.output;
    const auto root = node.output.find("Root Cause");
    ASSERT_NE(root, std::string::npos) << node.output;
    const std::string cause = node.output.substr(root);
    EXPECT_NE(cause.find("rank 3 (node "), std::string::npos) << node.output;
    EXPECT_NE(cause.find("local_rank 1) hung: no progress for"), std::string::npos) << node.output;
    for (const char* waiting : {"rank 0 (node", "rank 1 (node", "rank 2 (node"}) {
      EXPECT_EQ(cause.find(waiting), std::string::npos) << waiting << " only waited\n"
                                                        << node.output;
    }
  }
}

// Issue 37 under real ddprun agents: two nodes (c10d, 127.0.0.1 and 127.0.0.2), each with its
// own snapshot directory. Rank 0 deletes its node's directory and SIGKILLs itself; both agents
// restart their workers, node 1's copy is sent to node 0, and the run ends bit-identical.
std::vector<ProcessResult> run_two_ddprun_nodes(const fs::path& work,
                                                const std::vector<std::string>& extra_args) {
  fs::create_directories(work);
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  std::vector<ProcessSpec> specs;
  for (int node = 1; node <= 2; ++node) {
    ProcessSpec spec;
    spec.argv = {DDPRUN_BINARY,
                 "--nnodes",
                 "2",
                 "--nproc_per_node",
                 "2",
                 "--rdzv_backend",
                 "c10d",
                 "--rdzv_endpoint",
                 endpoint,
                 "--rdzv_id",
                 "sdk-snap",
                 "--local_addr",
                 "127.0.0." + std::to_string(node),
                 "--max_restarts",
                 "1",
                 "--no_python",
                 SDK_TEST_WORKER,
                 "resume",
                 "dir=" + (work / "node_{node}").string(),
                 "out=" + (work / "final.pt").string(),
                 "epochs=6"};
    spec.argv.insert(spec.argv.end(), extra_args.begin(), extra_args.end());
    spec.env["OMP_NUM_THREADS"] = "1";
    spec.env["TMPDIR"] = work.string();
    spec.output_file = work / ("node" + std::to_string(node) + ".log");
    specs.push_back(std::move(spec));
  }
  RunOptions options;
  options.deadline = std::chrono::seconds(150);
  return run_processes(specs, options);
}

TEST(SdkNodeLocalSnapshotTest, UnderDdprunOnTwoNodesANodeThatLostItsDiskResumesFromItsPeer) {
  TempDir dir;
  auto results = run_two_ddprun_nodes(dir.path() / "plain", {});
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  const auto uninterrupted = load_weights(dir.path() / "plain" / "final.pt");
  results =
      run_two_ddprun_nodes(dir.path() / "lost", {"kill_rank=0", "kill_at=10", "wipe_at_kill=1"});
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  const std::string output = results[0].output + results[1].output;
  EXPECT_NE(output.find("rank 0 deleted"), std::string::npos) << output;
  // Node 1's newest snapshot (step 8, or 4 if the kill came before its write was published).
  EXPECT_NE(output.find("rank 0: missing on this rank; received from rank 2"), std::string::npos)
      << output;
  const auto resumed = load_weights(dir.path() / "lost" / "final.pt");
  ASSERT_EQ(uninterrupted.size(), resumed.size());
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed[i], uninterrupted[i])) << "parameter " << i << " differs";
  }
}

TEST(ExactResumeTest, UnderDdprunKilledWorkerEndsBitIdentical) {
  expect_exact_resume({DDPRUN_BINARY, "--standalone", "--nproc_per_node", "2", "--max_restarts",
                       "1", "--no_python"});
}
#endif

// torchrun 1.13 (agent-hosted store, TORCHELASTIC_USE_AGENT_STORE=True). Runs where the
// project's torchrun wrapper and Debian's python3-torch are installed.
TEST(ExactResumeTest, UnderTorchrunKilledWorkerEndsBitIdentical) {
  const fs::path torchrun = TORCHRUN_WRAPPER;
  if (!fs::exists(torchrun) || !fs::exists(DDPRUN_TEST_PYTHON)) {
    GTEST_SKIP() << "no torchrun wrapper at " << torchrun;
  }
  // Not --standalone: torch 1.13's binds the fixed port 29400 (a run beside another torchrun
  // failed with "Address already in use"); the same c10d rendezvous on a port of our own.
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  expect_exact_resume({DDPRUN_TEST_PYTHON, torchrun.string(), "--nnodes", "1", "--rdzv_backend",
                       "c10d", "--rdzv_endpoint", endpoint, "--rdzv_id", "exact_resume",
                       "--nproc_per_node", "2", "--max_restarts", "1", "--monitor_interval", "0.2",
                       "--no_python"});
}

}  // namespace
}  // namespace ddp_test
