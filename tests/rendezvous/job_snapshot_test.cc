// A job's durable state (job_snapshot.h) on a fake clock: what a restarted daemon rebuilds from
// the bytes it stored, and how the rebuilt job treats nodes that do or do not resume.
#include "rendezvous/job_snapshot.h"

#include <gtest/gtest.h>

namespace ddprun::rdzv {
namespace {

using std::chrono::milliseconds;

class JobSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.min_nodes = 2;
    options_.max_nodes = 2;
    options_.max_restarts = 3;
    options_.heartbeat_timeout = milliseconds(200);
    state_.emplace("job", options_, clock_.steady_now());
    for (const char* id : {"a", "b"}) {
      auto d = state_->join(NodeInfo{id, 2, {}, std::string("addr-") + id, 1000}, options_,
                            clock_.steady_now());
      ASSERT_TRUE(d.ok());
    }
    ASSERT_EQ(state_->phase(), RoundState::Phase::kRunning);
  }
  // A restart: encode, then decode `later` on (another process's clock).
  RoundState reload(milliseconds later, std::map<std::string, uint64_t>* tokens = nullptr) {
    const std::string bytes = encode_job_snapshot(*state_, {{"a", 11}, {"b", 22}});
    clock_.advance(later);
    auto snap = decode_job_snapshot("job", bytes, clock_.steady_now());
    EXPECT_TRUE(snap.ok()) << snap.error_message();
    if (tokens) *tokens = snap->tokens;
    return std::move(*snap->round);
  }

  FakeClock clock_;
  JobOptions options_;
  std::optional<RoundState> state_;
};

TEST_F(JobSnapshotTest, ARestoredJobKeepsItsRoundRanksRestartsAndTokens) {
  auto failed = state_->report_failure("a", 0, "{}", 1, clock_.steady_now());
  ASSERT_TRUE(failed.ok());
  for (const char* id : {"a", "b"}) {
    ASSERT_TRUE(state_
                    ->join(NodeInfo{id, 2, {}, std::string("addr-") + id, 1000}, options_,
                           clock_.steady_now())
                    .ok());
  }
  ASSERT_EQ(state_->round(), 1u);
  std::map<std::string, uint64_t> tokens;
  RoundState restored = reload(milliseconds(5000), &tokens);
  EXPECT_EQ(restored.phase(), RoundState::Phase::kRunning);
  EXPECT_EQ(restored.round(), 1u);
  EXPECT_EQ(restored.restart_count(), 1u);
  EXPECT_EQ(restored.options(), options_);
  EXPECT_EQ(restored.member_count(), 2u);
  EXPECT_EQ(restored.member_placement("a"), state_->member_placement("a"));
  EXPECT_EQ(restored.member_placement("b"), state_->member_placement("b"));
  EXPECT_EQ(tokens, (std::map<std::string, uint64_t>{{"a", 11}, {"b", 22}}));
}

TEST_F(JobSnapshotTest, NodesThatResumeWithinTheWindowStayAndTheOthersAreLost) {
  RoundState restored = reload(milliseconds(10'000));
  ASSERT_TRUE(restored.next_deadline().has_value());
  EXPECT_EQ(*restored.next_deadline(), clock_.steady_now() + options_.heartbeat_timeout);
  EXPECT_TRUE(restored.reattach("a"));  // a resumed; b never does
  clock_.advance(options_.heartbeat_timeout);
  const Decisions d = restored.advance(clock_.steady_now());
  EXPECT_FALSE(restored.knows("b"));
  EXPECT_TRUE(restored.knows("a"));
  ASSERT_EQ(d.size(), 1u);  // the survivor re-rendezvouses, as after any member loss
  EXPECT_EQ(d[0].node_id, "a");
  ASSERT_TRUE(std::holds_alternative<RestartRequested>(d[0].push));
  EXPECT_EQ(std::get<RestartRequested>(d[0].push).reason, RestartReason::kMemberLost);
  EXPECT_EQ(restored.restart_count(), 0u);
}

// A decision recorded but not yet pushed when the daemon died: a restored node is told where the
// job is now (job_registry.cc gives each resumed node this push first).
TEST_F(JobSnapshotTest, ARestoredNodeCanBeToldWhereTheJobIsNow) {
  RoundState running = reload(milliseconds(0));
  auto a = running.catch_up("a");
  ASSERT_TRUE(a && std::holds_alternative<RoundAssigned>(*a));
  const auto& assigned = std::get<RoundAssigned>(*a);
  EXPECT_EQ(assigned.round, 0u);
  EXPECT_EQ(assigned.world_size, 4u);
  EXPECT_EQ(assigned.group_world_size, 2u);
  EXPECT_EQ(assigned.group_rank, running.member_placement("a")->first);
  EXPECT_EQ(assigned.rank_offset, assigned.group_rank * 2);
  EXPECT_EQ(assigned.master_port, 1000);

  // The round ended (a's failure) and the daemon died before telling anyone.
  ASSERT_TRUE(state_->report_failure("a", 0, "{}", 1, clock_.steady_now()).ok());
  RoundState gathering = reload(milliseconds(0));
  auto b = gathering.catch_up("b");
  ASSERT_TRUE(b && std::holds_alternative<RestartRequested>(*b));
  EXPECT_EQ(std::get<RestartRequested>(*b).round, 0u);
  EXPECT_FALSE(gathering.catch_up("nobody"));
}

// The job's outcome is durable: a failed job's message, report and exit code come back after a
// restart, for a node that missed them.
TEST_F(JobSnapshotTest, AFailedJobKeepsWhatItsNodesWereTold) {
  options_.max_restarts = 0;
  state_.emplace("job", options_, clock_.steady_now());
  for (const char* id : {"a", "b"}) {
    ASSERT_TRUE(state_->join(NodeInfo{id, 2, {}, std::string("addr-") + id, 1000}, options_,
                             clock_.steady_now())
                    .ok());
  }
  ASSERT_TRUE(state_->report_failure("a", 0, R"({"rank":1})", 7, clock_.steady_now()).ok());
  ASSERT_EQ(state_->phase(), RoundState::Phase::kFailed);
  RoundState restored = reload(milliseconds(0));
  EXPECT_EQ(restored.phase(), RoundState::Phase::kFailed);
  auto b = restored.catch_up("b");
  ASSERT_TRUE(b && std::holds_alternative<JobFailed>(*b));
  const auto& failed = std::get<JobFailed>(*b);
  EXPECT_EQ(failed.reason, JobFailureReason::kRestartsExhausted);
  EXPECT_EQ(failed.exit_code, 7);
  EXPECT_EQ(failed.failure_report, R"({"rank":1})");
  EXPECT_NE(failed.message.find("no restarts are left"), std::string::npos) << failed.message;
}

TEST_F(JobSnapshotTest, UnreadableOrNewerStateIsRefusedNamingTheJob) {
  auto garbage = decode_job_snapshot("job-x", "{not json", clock_.steady_now());
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error_message().find("job 'job-x'"), std::string::npos);
  auto partial =
      decode_job_snapshot("job-x", R"({"v":1,"round":{"phase":1}})", clock_.steady_now());
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error_message().find("unreadable"), std::string::npos);
  auto newer = decode_job_snapshot("job-x", R"({"v":99})", clock_.steady_now());
  ASSERT_FALSE(newer.ok());
  EXPECT_TRUE(newer.status().is_refused());
  EXPECT_NE(newer.error_message().find("newer ddp-rendezvous"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::rdzv
