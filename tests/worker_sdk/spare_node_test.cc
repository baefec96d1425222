// Snapshots on node-local disks (issue 37) with the C++ SDK under real agents: two ddprun nodes
// of two ranks each (c10d through the ddp-rendezvous daemon, nodes on 127.0.0.1 and
// 127.0.0.2), each node saving to its own directory. The node holding rank 0 is SIGKILLed
// mid-training; a spare (127.0.0.3) with an empty directory, waiting at the rendezvous, takes
// its place; its ranks receive the newest snapshot from the surviving node over the process
// group, every rank resumes at that step, and the final weights equal an uninterrupted run's
// bit for bit. Under both LibTorches (this program is built by scripts/sdk-torch2.sh too).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/process_harness.h"
#include "tests/support/temp_dir.h"
#include "tests/worker_sdk/test_models.h"

extern char** environ;

namespace ddprun::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using ddp_test::load_weights;
using ddp_test::sorted_names;

std::map<std::string, std::string> inherited_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const auto eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  return env;
}

class SdkSpareNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = inherited_environment();
    env_["OMP_NUM_THREADS"] = "1";
    env_["TMPDIR"] = dir_.path();
    ChildOptions options;
    options.executable = DDP_RENDEZVOUS_BINARY;
    options.args = {"--host", "127.0.0.1", "--port", "0"};
    options.env = env_;
    options.cwd = dir_.path();
    auto daemon = ChildProcess::start(options);
    ASSERT_TRUE(daemon) << daemon.error_message();
    daemon_ = std::move(daemon.value());
    const std::string prefix = "listening on 127.0.0.1:";
    ASSERT_TRUE(daemon_->wait_for_stdout("\n", deadline_after(10s))) << daemon_->stderr_text();
    const std::string line = daemon_->stdout_text();
    ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
    endpoint_ = "127.0.0.1:" + line.substr(prefix.size(), line.find('\n') - prefix.size());
  }

  void TearDown() override {
    if (daemon_) {
      daemon_->send_signal(SIGTERM);
      (void)daemon_->wait(deadline_after(10s));
    }
  }

  fs::path work() const { return fs::path(dir_.path()); }

  // Node `n` of job `job`: its snapshots in <work>/<job>/node<n>, its address 127.0.0.<n>.
  std::unique_ptr<ChildProcess> start_node(int n, const std::string& job,
                                           const std::vector<std::string>& extra_args) {
    const fs::path job_dir = work() / job;
    fs::create_directories(job_dir);
    ChildOptions options;
    options.executable = DDPRUN_BINARY;
    options.args = {"--nnodes",
                    "2",
                    "--nproc_per_node",
                    "2",
                    "--rdzv_backend",
                    "c10d",
                    "--rdzv_endpoint",
                    endpoint_,
                    "--rdzv_id",
                    job,
                    "--local_addr",
                    "127.0.0." + std::to_string(n),
                    "--max_restarts",
                    "3",
                    "--no_python",
                    SDK_TEST_WORKER,
                    "resume",
                    "dir=" + (job_dir / ("node" + std::to_string(n))).string(),
                    "out=" + (job_dir / "final.pt").string(),
                    "epochs=6"};
    options.args.insert(options.args.end(), extra_args.begin(), extra_args.end());
    options.env = env_;
    options.cwd = dir_.path();
    auto child = ChildProcess::start(options);
    if (!child) {
      ADD_FAILURE() << "starting node " << n << ": " << child.error_message();
      return nullptr;
    }
    return std::move(child.value());
  }

  // Polled: nothing pushes a spare's arrival to a test.
  ::testing::AssertionResult wait_for_standby_node(Deadline deadline) const {
    while (TestClock::now() < deadline) {
      ChildOptions status;
      status.executable = DDP_RENDEZVOUS_BINARY;
      status.args = {"status", "--endpoint", endpoint_};
      status.env = env_;
      auto child = ChildProcess::start(status);
      if (!child) return ::testing::AssertionFailure() << child.error_message();
      (void)(*child)->wait(deadline);
      if ((*child)->stdout_text().find("standby") != std::string::npos) {
        return ::testing::AssertionSuccess();
      }
    }
    return ::testing::AssertionFailure() << "no node showed as waiting at " << endpoint_;
  }

  static std::string describe(ChildProcess& node, const std::optional<ChildExit>& exit) {
    std::ostringstream out;
    if (exit) {
      out << *exit;
    } else {
      out << "still running";
    }
    out << "\nstdout:\n" << node.stdout_text() << "\nstderr:\n" << node.stderr_text();
    return out.str();
  }

  ddprun::testing::TempDir dir_;
  std::map<std::string, std::string> env_;
  std::string endpoint_;
  std::unique_ptr<ChildProcess> daemon_;
};

TEST_F(SdkSpareNodeTest, SpareOfTheLostRankZeroNodeResumesFromThePeersCopyBitIdentical) {
  // The reference: the same job, never interrupted.
  {
    auto first = start_node(1, "ref", {});
    auto second = start_node(2, "ref", {});
    ASSERT_TRUE(first && second);
    for (auto* node : {first.get(), second.get()}) {
      const auto exit = node->wait(deadline_after(120s));
      ASSERT_TRUE(exit && exit->code == 0) << describe(*node, exit);
    }
  }
  const auto uninterrupted = load_weights(work() / "ref" / "final.pt");

  // Rank 0 stops at step 10, after every node's copies of steps 4 and 8 are durable.
  const std::vector<std::string> pause = {"pause_rank=0", "pause_at=10"};
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  nodes.push_back(start_node(1, "cut", pause));
  nodes.push_back(start_node(2, "cut", pause));
  ASSERT_TRUE(nodes[0] && nodes[1]);
  const std::string paused = "rank 0 pauses at global step 10";
  int lost = 0;
  const Deadline pause_deadline = deadline_after(120s);
  while (lost == 0 && TestClock::now() < pause_deadline) {
    for (int n : {1, 2}) {
      if (nodes[n - 1]->wait_for_stdout(paused, deadline_after(200ms))) lost = n;
    }
  }
  ASSERT_NE(lost, 0) << describe(*nodes[0], std::nullopt) << describe(*nodes[1], std::nullopt);
  const int survivor = 3 - lost;
  ASSERT_NE(nodes[lost - 1]->stdout_text().find("writing to " + (work() / "cut").string() +
                                                "/node" + std::to_string(lost)),
            std::string::npos);

  nodes.push_back(start_node(3, "cut", pause));
  ASSERT_TRUE(nodes[2]);
  ASSERT_TRUE(wait_for_standby_node(deadline_after(60s)));

  nodes[lost - 1]->send_signal(SIGKILL);
  const auto killed = nodes[lost - 1]->wait(deadline_after(10s));
  ASSERT_TRUE(killed && killed->signal == SIGKILL) << describe(*nodes[lost - 1], killed);

  const auto survived = nodes[survivor - 1]->wait(deadline_after(120s));
  ASSERT_TRUE(survived && survived->code == 0) << describe(*nodes[survivor - 1], survived);
  const auto spare = nodes[2]->wait(deadline_after(30s));
  ASSERT_TRUE(spare && spare->code == 0) << describe(*nodes[2], spare);

  // Every rank of the new round resumed at step 8; the spare's ranks received it.
  const std::string output = nodes[survivor - 1]->stdout_text() + nodes[2]->stdout_text();
  EXPECT_NE(output.find("resumed at epoch 2 step 2 (global step 8)"), std::string::npos) << output;
  EXPECT_NE(output.find("snapshot-000000000008.ddpsnap: rank"), std::string::npos) << output;
  EXPECT_NE(output.find("missing on this rank; received from rank"), std::string::npos) << output;
  const auto resumed = load_weights(work() / "cut" / "final.pt");
  ASSERT_EQ(uninterrupted.size(), resumed.size());
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed[i], uninterrupted[i])) << "parameter " << i << " differs";
  }
  // The spare's directory, empty at its start, keeps the newest two (keep_last=2); the lost
  // node's still holds what it had when it died.
  const std::vector<std::string> steps_12_and_16 = {"snapshot-000000000012.ddpsnap",
                                                    "snapshot-000000000016.ddpsnap"};
  EXPECT_EQ(sorted_names(work() / "cut" / "node3"), steps_12_and_16);
  EXPECT_EQ(sorted_names(work() / "cut" / ("node" + std::to_string(survivor))), steps_12_and_16);
  const std::vector<std::string> steps_4_and_8 = {"snapshot-000000000004.ddpsnap",
                                                  "snapshot-000000000008.ddpsnap"};
  EXPECT_EQ(sorted_names(work() / "cut" / ("node" + std::to_string(lost))), steps_4_and_8);
}

}  // namespace
}  // namespace ddprun::testing
