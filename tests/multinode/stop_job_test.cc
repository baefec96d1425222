// Failures that must not be restarted, across nodes (issue 36): a rank of node 2 calls
// ddprun.stop_job(), or every attempt fails at the same step (--max_no_progress_restarts); the
// rendezvous fails the job at once although restarts are left, and both nodes exit 79 with the
// same report and its reason.
#include <filesystem>

#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class StopJobTest : public MultinodeTest {};

TEST_F(StopJobTest, ARanksStopJobEndsEveryNodeWithExit79AndTheSameReport) {
  env_["PYTHONPATH"] =
      (std::filesystem::path(worker("stop_job.py")).parent_path() / "../../../python")
          .lexically_normal()
          .string();
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    NodeSpec spec;
    spec.node = n;
    spec.endpoint = endpoint;
    spec.extra = {"--max_restarts", "3"};
    spec.entry = {worker("stop_job.py"), "stop", "bad shard 17", "3"};
    nodes.push_back(start_node(spec));
    ASSERT_TRUE(nodes.back());
  }
  const auto runs = finish_all(nodes, deadline_after(60s));
  ASSERT_EQ(runs.size(), 2u);
  for (const RunResult& run : runs) {
    ASSERT_TRUE(ExitedWith(run, 79));
    EXPECT_NE(run.err.find("not restarted: rank 3 asked to stop the job: bad shard 17"),
              std::string::npos)
        << run.err;
  }
  EXPECT_EQ(root_cause_section(runs[0].err), root_cause_section(runs[1].err));
  EXPECT_FALSE(std::filesystem::exists(out("attempt_1_0"))) << "restarted:\n"
                                                            << runs[0].err << runs[1].err;
}

// --max_no_progress_restarts across nodes: every node counts the failed attempts over its own
// ranks' steps (rank 3 of node 2 fails at step 1234 once every rank has reported it; node 1
// hears of it as a job-wide restart); the K-th such failure ends the job on both nodes, exit 79.
TEST_F(StopJobTest, FailuresAtTheSameStepStopTheJobOnEveryNodeAtTheKth) {
  env_["PYTHONPATH"] =
      (std::filesystem::path(worker("stop_job.py")).parent_path() / "../../../python")
          .lexically_normal()
          .string();
  for (int restart : {0, 1}) {
    for (int rank : {0, 1, 2}) {
      make_fifo(out("ready_" + std::to_string(restart) + "_" + std::to_string(rank) + ".fifo"));
    }
  }
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    NodeSpec spec;
    spec.node = n;
    spec.endpoint = endpoint;
    spec.extra = {"--max_restarts", "5", "--max_no_progress_restarts", "2"};
    spec.entry = {mn_worker("stuck_at_step.py"), "3"};
    nodes.push_back(start_node(spec));
    ASSERT_TRUE(nodes.back());
  }
  const auto runs = finish_all(nodes, deadline_after(60s));
  ASSERT_EQ(runs.size(), 2u);
  for (const RunResult& run : runs) {
    ASSERT_TRUE(ExitedWith(run, 79));
    EXPECT_NE(run.err.find("2 attempts in a row failed at step 1234: not restarting"),
              std::string::npos)
        << run.err;
  }
  EXPECT_EQ(root_cause_section(runs[0].err), root_cause_section(runs[1].err));
  EXPECT_TRUE(std::filesystem::exists(out("attempt_1_3")));
  EXPECT_FALSE(std::filesystem::exists(out("attempt_2_3"))) << "a third attempt";
}

}  // namespace
}  // namespace ddprun::testing
