// Snapshots on node-local disks (issue 37), with real agents and torch workers: two nodes of
// two ranks each train a DDP model, each node saving its snapshots (ddprun.save_snapshot) to its
// own directory, a third node waiting as a spare with an empty one. The node holding rank 0 is
// SIGKILLed mid-training; the spare takes its place, its ranks receive the newest snapshot from
// the surviving node over the process group (ddprun.load_latest_snapshot), every rank resumes
// at that step, and the final weights equal those of an uninterrupted run of the same job.
// The ddp-rendezvous daemon is the endpoint, so that losing any node leaves the rendezvous up.
#include <csignal>
#include <filesystem>

#include "tests/integration/test_files.h"
#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kSteps = 8;
constexpr int kPauseAt = 4;

class NodeLocalSnapshotTest : public MultinodeTest {
 protected:
  void SetUp() override {
    MultinodeTest::SetUp();
    env_["PYTHONPATH"] =
        (std::filesystem::path(mn_worker("snapshot_train.py")).parent_path() / "../../../python")
            .lexically_normal()
            .string();
    make_fifo(out("release.fifo"));
    daemon_ = start_daemon(&endpoint_);
    ASSERT_NE(daemon_, nullptr);
  }

  void TearDown() override {
    if (daemon_) {
      daemon_->send_signal(SIGTERM);
      (void)finish(*daemon_, deadline_after(10s));
      daemon_.reset();
    }
    MultinodeTest::TearDown();
  }

  NodeSpec node(int n, const std::string& run, int pause_at) const {
    NodeSpec spec;
    spec.node = n;
    spec.nnodes = "2";
    spec.endpoint = endpoint_;
    spec.job = run;
    spec.timeouts.last_call_timeout = "20";  // a round closes only when full
    spec.extra = {"--max_restarts", "3"};
    spec.entry = {mn_worker("snapshot_train.py"),
                  "--run",
                  run,
                  "--steps",
                  std::to_string(kSteps),
                  "--pause-at",
                  std::to_string(pause_at)};
    return spec;
  }

  // Waits until `endpoint_`'s status lists a waiting (standby) node.
  ::testing::AssertionResult wait_for_spare() const {
    return wait_for_standby_node(endpoint_, deadline_after(60s));
  }

  std::string endpoint_;
  std::unique_ptr<ChildProcess> daemon_;
};

TEST_F(NodeLocalSnapshotTest,
       SpareOfTheLostRankZeroNodeResumesFromThePeersSnapshotAsIfUninterrupted) {
  // The reference: the same job, never interrupted.
  {
    std::vector<std::unique_ptr<ChildProcess>> nodes;
    for (int n : {1, 2}) {
      nodes.push_back(start_node(node(n, "ref", 0)));
      ASSERT_NE(nodes.back(), nullptr);
    }
    const auto runs = finish_all(nodes, deadline_after(120s));
    for (const RunResult& run : runs) ASSERT_TRUE(ExitedWith(run, 0)) << run.describe();
  }
  const auto reference = markers("final_ref");
  ASSERT_EQ(reference.size(), 1u);

  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    nodes.push_back(start_node(node(n, "cut", kPauseAt)));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("paused_cut_", 4, deadline_after(90s)))
      << finish(*nodes[0], deadline_after(1s)).describe();
  nodes.push_back(start_node(node(3, "cut", kPauseAt)));
  ASSERT_NE(nodes.back(), nullptr);
  ASSERT_TRUE(wait_for_spare());

  // Kill the node whose workers hold rank 0 (which one depends on the order they joined in).
  int lost = 0;
  for (const auto& [name, m] : markers("paused_cut_")) {
    if (m["RANK"] == "0") lost = std::stoi(m["node"].get<std::string>());
  }
  ASSERT_TRUE(lost == 1 || lost == 2);
  const int survivor = 3 - lost;
  nodes[lost - 1]->send_signal(SIGKILL);
  const RunResult killed = finish(*nodes[lost - 1], deadline_after(10s));
  ASSERT_TRUE(killed.exit && killed.exit->signal == SIGKILL) << killed.describe();

  const RunResult survived = finish(*nodes[survivor - 1], deadline_after(120s));
  const RunResult spare = finish(*nodes[2], deadline_after(30s));
  ASSERT_TRUE(ExitedWith(survived, 0)) << survived.describe();
  ASSERT_TRUE(ExitedWith(spare, 0)) << spare.describe();

  // Every rank of the second round started at the snapshot of step kPauseAt.
  int resumed = 0;
  for (const auto& [name, m] : markers("start_cut_")) {
    if (m["start"].get<int>() == 0) continue;
    EXPECT_EQ(m["start"].get<int>(), kPauseAt) << name;
    EXPECT_NE(m["node"], std::to_string(lost)) << name;
    ++resumed;
  }
  EXPECT_EQ(resumed, 4);
  EXPECT_EQ(markers("start_cut_n3_").size(), 2u) << "the spare never ran";

  // The spare's directory, empty at its start, holds the newest snapshots (keep_last=2).
  const std::filesystem::path spare_dir = out("snap_cut/node3");
  EXPECT_TRUE(std::filesystem::exists(spare_dir / "snapshot-000000000008.pt"));
  EXPECT_TRUE(std::filesystem::exists(spare_dir / "snapshot-000000000007.pt"));
  EXPECT_FALSE(std::filesystem::exists(spare_dir / "snapshot-000000000006.pt"));

  const auto final_cut = markers("final_cut");
  ASSERT_EQ(final_cut.size(), 1u);
  EXPECT_EQ(final_cut.begin()->second["start"].get<int>(), kPauseAt);
  EXPECT_EQ(final_cut.begin()->second["weights"], reference.begin()->second["weights"])
      << "the resumed run's final weights differ from the uninterrupted run's";
}

}  // namespace
}  // namespace ddprun::testing
