// The round state machine on a fake clock: no sockets, no sleeps.
#include "rendezvous/server/round_state.h"

#include <map>

#include <gtest/gtest.h>

namespace ddprun::rdzv {
namespace {

using std::chrono::milliseconds;

class RoundStateTest : public ::testing::Test {
 protected:
  void make(uint32_t min, uint32_t max, uint32_t max_restarts = 0) {
    options_.min_nodes = min;
    options_.max_nodes = max;
    options_.max_restarts = max_restarts;
    options_.join_timeout = milliseconds(1000);
    options_.last_call_timeout = milliseconds(100);
    options_.heartbeat_timeout = milliseconds(200);
    options_.exit_barrier_timeout = milliseconds(500);
    state_.emplace("job", options_, clock_.steady_now());
  }
  Decisions join(const std::string& id, uint32_t lws = 2, std::optional<uint32_t> hint = {}) {
    NodeInfo info{id, lws, hint, "addr-" + id, 1000};
    auto d = state_->join(info, options_, clock_.steady_now());
    EXPECT_TRUE(d.ok()) << d.error_message();
    return d.ok() ? *d : Decisions{};
  }
  Decisions advance(milliseconds by) {
    clock_.advance(by);
    return state_->advance(clock_.steady_now());
  }
  static std::map<std::string, RoundAssigned> assignments(const Decisions& d) {
    std::map<std::string, RoundAssigned> out;
    for (const auto& o : d) {
      if (auto* a = std::get_if<RoundAssigned>(&o.push)) out[o.node_id] = *a;
    }
    return out;
  }
  template <class T>
  static size_t count(const Decisions& d) {
    size_t n = 0;
    for (const auto& o : d) n += std::holds_alternative<T>(o.push);
    return n;
  }

  FakeClock clock_;
  JobOptions options_;
  std::optional<RoundState> state_;
};

TEST_F(RoundStateTest, ClosesAfterLastCallOnceMinJoined) {
  make(2, 3);
  EXPECT_TRUE(join("a").empty());
  EXPECT_TRUE(join("b").empty());
  EXPECT_TRUE(advance(milliseconds(99)).empty());
  auto a = assignments(advance(milliseconds(1)));
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a["a"].group_rank, 0u);
  EXPECT_EQ(a["b"].group_rank, 1u);
  EXPECT_EQ(a["b"].rank_offset, 2u);
  EXPECT_EQ(a["a"].world_size, 4u);
  EXPECT_EQ(a["b"].group_world_size, 2u);
  EXPECT_EQ(a["b"].master_addr, "addr-a");  // offered by group rank 0
  EXPECT_EQ(state_->phase(), RoundState::Phase::kRunning);
}

TEST_F(RoundStateTest, ClosesAtOnceAtMaxWithUnevenLocalWorldSizes) {
  make(1, 3);
  join("a", 1);
  join("b", 4);
  auto a = assignments(join("c", 2));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a["c"].rank_offset, 5u);
  EXPECT_EQ(a["c"].world_size, 7u);
  EXPECT_EQ(a["a"].round, 0u);
}

TEST_F(RoundStateTest, JoinTimeoutWithTooFewNodesFailsTheJobWithAClearMessage) {
  make(3, 3);
  join("a");
  join("b");
  EXPECT_TRUE(advance(milliseconds(999)).empty());
  auto d = advance(milliseconds(1));
  ASSERT_EQ(count<JobFailed>(d), 2u);
  const auto& failed = std::get<JobFailed>(d[0].push);
  EXPECT_NE(failed.message.find("2 of at least 3 nodes"), std::string::npos) << failed.message;
  EXPECT_EQ(failed.exit_code, kRendezvousFailureExitCode);
  EXPECT_TRUE(state_->finished());
  EXPECT_FALSE(state_->join({"c", 1, {}, "", 0}, options_, clock_.steady_now()).ok());
}

// Issue 23 (spares), the bug first: nodes a and b fill the job, c waits; b is lost. c used to
// stay waiting beside b's empty place (MIN = MAX: the round never closed; MIN < MAX: a went on
// alone). The spare takes b's group rank, and the round closes the moment a is back.
class SpareTest : public RoundStateTest, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(SpareTest, ASpareTakesALostMembersGroupRankAtOnce) {
  make(GetParam(), 2);
  join("a");
  ASSERT_EQ(assignments(join("b")).size(), 2u);  // full: closed at once
  EXPECT_TRUE(assignments(join("c")).empty()) << "no scale-up beyond MAX";
  const Decisions lost = state_->detach("b", clock_.steady_now());
  EXPECT_EQ(count<RestartRequested>(lost), 2u);
  auto a = assignments(join("a"));  // no last call: the round is full
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a["a"].group_rank, 0u);
  EXPECT_EQ(a["c"].group_rank, 1u) << "the spare takes the lost node's rank";
  EXPECT_EQ(a["c"].group_world_size, 2u);
  EXPECT_EQ(state_->restart_count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(MinEqualOrBelowMax, SpareTest, ::testing::Values(2u, 1u));

// The spare also takes the place of a survivor that never comes back: after a worker failure
// both members are expected; b's connection is gone and its grace runs out.
TEST_F(RoundStateTest, ASpareTakesThePlaceOfASurvivorDroppedAtHeartbeatTimeout) {
  make(2, 2, /*max_restarts=*/1);
  join("a");
  join("b");
  join("c");  // waits: the job is full
  auto failed = state_->report_failure("a", 0, "{}", 1, clock_.steady_now());
  ASSERT_TRUE(failed.ok());
  EXPECT_TRUE(assignments(join("a")).empty()) << "b is still expected back";
  state_->detach("b", clock_.steady_now());
  auto a = assignments(advance(milliseconds(200)));  // heartbeat_timeout: b is dropped
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a["c"].group_rank, 1u);
  EXPECT_EQ(a["c"].restart_count, 1u);
}

TEST_F(RoundStateTest, MismatchedOptionsAreRejected) {
  make(2, 2);
  JobOptions other = options_;
  other.max_nodes = 4;
  auto r = state_->join({"a", 1, {}, "", 0}, other, clock_.steady_now());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("nnodes=2:4"), std::string::npos);
}

TEST_F(RoundStateTest, ScaleUpRestartsMembersWithoutCountingARestart) {
  make(1, 3, /*max_restarts=*/0);
  join("a");
  join("b");
  assignments(advance(milliseconds(100)));
  auto d = join("c");
  ASSERT_EQ(count<RestartRequested>(d), 2u);
  EXPECT_EQ(std::get<RestartRequested>(d[0].push).reason, RestartReason::kScaleUp);
  EXPECT_TRUE(join("b").empty());
  auto a = assignments(join("a"));  // every survivor is back: closes without a last call
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a["a"].group_rank, 0u);  // ranks kept across rounds
  EXPECT_EQ(a["b"].group_rank, 1u);
  EXPECT_EQ(a["c"].group_rank, 2u);
  EXPECT_EQ(a["c"].round, 1u);
  EXPECT_EQ(a["c"].restart_count, 0u);
}

TEST_F(RoundStateTest, NewcomerWaitsWhenTheRoundIsFull) {
  make(1, 2);
  join("a");
  join("b");
  EXPECT_TRUE(join("c").empty());  // standby: no restart, the round is at max
  auto d = state_->leave("b", clock_.steady_now());
  ASSERT_EQ(count<RestartRequested>(d), 1u);
  auto a = assignments(join("a"));  // a and the waiting c make max
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a["a"].group_rank, 0u);
  EXPECT_EQ(a["c"].group_rank, 1u);
}

TEST_F(RoundStateTest, LostConnectionRestartsSurvivorsAtOnceAndKeepsTheirRanks) {
  make(2, 3);
  join("a");
  join("b");
  join("c");
  auto d = state_->detach("a", clock_.steady_now());
  // Every member is told at once; a's copy waits for a reconnect.
  ASSERT_EQ(count<RestartRequested>(d), 3u);
  const auto& restart = std::get<RestartRequested>(d[0].push);
  EXPECT_EQ(restart.reason, RestartReason::kMemberLost);
  EXPECT_NE(restart.message.find("node 'a' lost"), std::string::npos);
  join("c");
  auto a = assignments(join("b"));  // the survivors are back: no wait for a
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a["b"].group_rank, 1u);     // kept
  EXPECT_EQ(a["c"].group_rank, 0u);     // its old rank 2 no longer exists: first free rank
  EXPECT_EQ(a["c"].restart_count, 0u);  // a lost node is not a worker failure
  EXPECT_TRUE(advance(milliseconds(200)).empty());  // a's grace ends: nothing left to do
  EXPECT_FALSE(state_->knows("a"));
}

TEST_F(RoundStateTest, ReattachWithinGraceKeepsMembershipAndRank) {
  make(2, 2);
  join("a");
  join("b");
  ASSERT_EQ(count<RestartRequested>(state_->detach("a", clock_.steady_now())), 2u);
  advance(milliseconds(150));
  EXPECT_TRUE(state_->reattach("a"));               // back within heartbeat_timeout: still known
  EXPECT_TRUE(advance(milliseconds(100)).empty());  // past the grace: not dropped
  EXPECT_TRUE(state_->knows("a"));
  join("b");
  auto a = assignments(join("a"));
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a["a"].group_rank, 0u);  // its old rank
  EXPECT_EQ(a["b"].group_rank, 1u);
}

TEST_F(RoundStateTest, DetachOfANodeStillGatheringKeepsItsPlaceForTheGrace) {
  make(2, 3);
  join("a");
  EXPECT_TRUE(state_->detach("a", clock_.steady_now()).empty());
  EXPECT_TRUE(state_->reattach("a"));
  join("b");
  auto a = assignments(advance(milliseconds(100)));  // last call
  EXPECT_EQ(a.size(), 2u);
}

TEST_F(RoundStateTest, TooFewSurvivorsWaitJoinTimeoutThenFail) {
  make(2, 2);
  join("a");
  join("b");
  advance(milliseconds(5000));
  auto d = state_->leave("b", clock_.steady_now());
  ASSERT_EQ(count<RestartRequested>(d), 1u);
  EXPECT_TRUE(join("a").empty());
  EXPECT_TRUE(advance(milliseconds(999)).empty());
  d = advance(milliseconds(1));
  ASSERT_EQ(count<JobFailed>(d), 1u);
  EXPECT_EQ(d[0].node_id, "a");
}

TEST_F(RoundStateTest, WorkerFailuresCountJobWideRestartsThenFailWithTheFirstReport) {
  make(2, 2, /*max_restarts=*/1);
  join("a");
  join("b");
  auto d = *state_->report_failure("b", 0, "report-1", 3, clock_.steady_now());
  ASSERT_EQ(count<RestartRequested>(d), 2u);  // the reporter too
  EXPECT_EQ(std::get<RestartRequested>(d[0].push).failure_report, "report-1");
  EXPECT_EQ(std::get<RestartRequested>(d[0].push).reason, RestartReason::kWorkerFailure);
  // A late report of the same (ended) round is ignored: one failure, one restart.
  EXPECT_TRUE(state_->report_failure("a", 0, "late", 4, clock_.steady_now())->empty());
  join("a");
  auto a = assignments(join("b"));
  EXPECT_EQ(a["a"].restart_count, 1u);
  d = *state_->report_failure("a", 1, "report-2", 7, clock_.steady_now());
  ASSERT_EQ(count<JobFailed>(d), 2u);
  for (const auto& o : d) {
    const auto& f = std::get<JobFailed>(o.push);
    EXPECT_EQ(f.failure_report, "report-2");
    EXPECT_EQ(f.exit_code, 7);
    EXPECT_NE(f.message.find("max_restarts=1"), std::string::npos);
  }
}

TEST_F(RoundStateTest, NodeRankHintsAreHonoured) {
  make(3, 3);
  join("a", 1, 2);
  join("b", 1);
  auto a = assignments(join("c", 1, 0));
  EXPECT_EQ(a["a"].group_rank, 2u);
  EXPECT_EQ(a["c"].group_rank, 0u);
  EXPECT_EQ(a["b"].group_rank, 1u);
  EXPECT_EQ(a["b"].master_addr, "addr-c");
}

TEST_F(RoundStateTest, ExitBarrierSucceedsWhenAllReportSuccess) {
  make(2, 2);
  join("a");
  join("b");
  EXPECT_TRUE(state_->report_success("a", 0, clock_.steady_now())->empty());
  auto d = *state_->report_success("b", 0, clock_.steady_now());
  EXPECT_EQ(count<JobSucceeded>(d), 2u);
  EXPECT_EQ(state_->phase(), RoundState::Phase::kSucceeded);
}

TEST_F(RoundStateTest, ExitBarrierTimesOutNamingTheMissingNodes) {
  make(2, 2);
  join("a");
  join("b");
  ASSERT_TRUE(state_->report_success("a", 0, clock_.steady_now()).ok());
  EXPECT_TRUE(advance(milliseconds(499)).empty());
  auto d = advance(milliseconds(1));
  ASSERT_EQ(count<JobFailed>(d), 2u);
  EXPECT_NE(std::get<JobFailed>(d[0].push).message.find("(b)"), std::string::npos);
}

TEST_F(RoundStateTest, FailureAfterSomeSucceededTakesTheFailurePath) {
  make(2, 2);
  join("a");
  join("b");
  ASSERT_TRUE(state_->report_success("a", 0, clock_.steady_now()).ok());
  auto d = *state_->report_failure("b", 0, "boom", 1, clock_.steady_now());
  EXPECT_EQ(count<JobFailed>(d), 2u);
}

// A blip at the exit barrier: b's connection drops after a finished. b keeps its place for its
// grace, comes back and finishes; a is not sent to run its workers again.
TEST_F(RoundStateTest, AMemberLostAtTheExitBarrierHasItsGraceToFinish) {
  make(2, 2);
  join("a");
  join("b");
  ASSERT_TRUE(state_->report_success("a", 0, clock_.steady_now()).ok());
  EXPECT_TRUE(state_->detach("b", clock_.steady_now()).empty());
  EXPECT_TRUE(advance(milliseconds(150)).empty());
  EXPECT_TRUE(state_->reattach("b"));
  auto d = *state_->report_success("b", 0, clock_.steady_now());
  EXPECT_EQ(count<JobSucceeded>(d), 2u);
}

// b never comes back: when its grace ends, the job restarts as a whole, a included.
TEST_F(RoundStateTest, AMemberLostForGoodAtTheExitBarrierRestartsEveryMember) {
  make(1, 2);
  join("a");
  join("b");
  ASSERT_TRUE(state_->report_success("a", 0, clock_.steady_now()).ok());
  EXPECT_TRUE(state_->detach("b", clock_.steady_now()).empty());
  auto d = advance(milliseconds(200));
  ASSERT_EQ(count<RestartRequested>(d), 1u);
  EXPECT_EQ(d[0].node_id, "a");
  EXPECT_EQ(std::get<RestartRequested>(d[0].push).reason, RestartReason::kMemberLost);
  EXPECT_FALSE(state_->knows("b"));
}

TEST_F(RoundStateTest, NextDeadlineTracksLastCallJoinTimeoutAndGrace) {
  make(2, 3);
  const auto t0 = clock_.steady_now();
  EXPECT_EQ(state_->next_deadline(), t0 + milliseconds(1000));
  join("a");
  join("b");
  EXPECT_EQ(state_->next_deadline(), t0 + milliseconds(100));
  EXPECT_TRUE(state_->detach("a", t0).empty());  // still gathering: a keeps its place
  EXPECT_EQ(state_->next_deadline(), t0 + milliseconds(100));
  advance(milliseconds(100));
  EXPECT_EQ(state_->next_deadline(), t0 + milliseconds(200));  // a's grace
}

// Issue 36: the survivors of a lost host moved the job to its successor, whose first round then
// waited a whole last call although every survivor was there.
TEST_F(RoundStateTest, AJobMovedAfterItsHostWasLostClosesOnceEverySurvivorJoined) {
  make(1, 4);
  state_->expect_survivors(2);  // the last round had three nodes; the host is gone
  EXPECT_TRUE(join("b").empty()) << "one survivor is still coming";
  auto a = assignments(join("c"));
  ASSERT_EQ(a.size(), 2u) << "no last call once every survivor is back";
  EXPECT_EQ(a["c"].group_world_size, 2u);
}

TEST_F(RoundStateTest, AMovedJobWhoseSurvivorDoesNotComeWaitsTheLastCall) {
  make(1, 4);
  state_->expect_survivors(2);
  join("b");
  EXPECT_TRUE(advance(milliseconds(99)).empty()) << "c, the other survivor, may still come";
  EXPECT_EQ(assignments(advance(milliseconds(1))).size(), 1u);
}

TEST_F(RoundStateTest, AJobThatDidNotMoveWaitsTheLastCallAsBefore) {
  make(1, 4);
  state_->expect_survivors(0);
  join("b");
  EXPECT_TRUE(join("c").empty());
  EXPECT_EQ(assignments(advance(milliseconds(100))).size(), 2u);
}

}  // namespace
}  // namespace ddprun::rdzv
