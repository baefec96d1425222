// The rendezvous coordinator on a scripted client: how it turns the agent's calls into
// requests (the job's terms travel whole) and the server's replies and pushes into the
// agent's decisions and events. No sockets, no sleeps.
#include "agent/coordination/rendezvous_coordinator.h"

#include <gtest/gtest.h>

#include "tests/agent/scripted_rendezvous_client.h"

namespace ddprun::agent {
namespace {

using testing::ScriptedRendezvousClient;

rdzv::JobOptions job_terms() {
  rdzv::JobOptions job;
  job.min_nodes = 2;
  job.max_nodes = 4;
  job.max_restarts = 3;
  job.join_timeout = Millis(1234);
  job.last_call_timeout = Millis(55);
  job.heartbeat_timeout = Millis(777);
  job.exit_barrier_timeout = Millis(999);
  return job;
}

FailureReport report_of_rank(int rank, int exit_code) {
  FailureReport report;
  report.entrypoint = "train.py";
  WorkerFailure f;
  f.rank = rank;
  f.exit = ExitStatus::exited(exit_code);
  report.failures.push_back(f);
  return report;
}

rdzv::RoundAssigned round_of(uint64_t round, uint32_t restart_count) {
  rdzv::RoundAssigned a;
  a.job_id = "job";
  a.round = round;
  a.group_rank = 1;
  a.group_world_size = 2;
  a.local_world_size = 2;
  a.rank_offset = 2;
  a.world_size = 4;
  a.master_addr = "10.0.0.1";
  a.master_port = 4000;
  a.restart_count = restart_count;
  a.max_restarts = 3;
  return a;
}

class RendezvousCoordinatorTest : public ::testing::Test {
 protected:
  RendezvousCoordinatorTest() : coordinator_(options(), client_) {
    coordinator_.set_event_handler([this](const CoordinatorEvent& e) { events_.push_back(e); });
  }
  static RendezvousCoordinatorOptions options() {
    RendezvousCoordinatorOptions o;
    o.job = job_terms();
    o.node_id = "node-b";
    o.node_rank_hint = 1;
    o.server = "head:29400";
    return o;
  }
  // Joins round `round` through the scripted client and returns the agent's assignment.
  RoundAssignment join_round(uint64_t round, uint32_t restart_count) {
    std::optional<Result<RoundAssignment>> got;
    coordinator_.join({2, "10.0.0.2", 5000}, [&](Result<RoundAssignment> a) { got = a; });
    if (client_.pending_connect) std::exchange(client_.pending_connect, nullptr)(Status());
    EXPECT_TRUE(client_.pending_join);
    std::exchange(client_.pending_join, nullptr)(round_of(round, restart_count));
    EXPECT_TRUE(got && got->ok());
    return got->value();
  }
  // Reports our failure and returns the decision slot (set once the coordinator decides).
  std::optional<Coordinator::FailureDecision>& report_failure(const FailureReport& report) {
    coordinator_.report_failure(report, [this](Coordinator::FailureDecision d) { decision_ = d; });
    return decision_;
  }

  ScriptedRendezvousClient client_;
  RendezvousCoordinator coordinator_;
  std::vector<CoordinatorEvent> events_;
  std::optional<Coordinator::FailureDecision> decision_;
};

TEST_F(RendezvousCoordinatorTest, JoinConnectsOnceAndSendsTheJobTermsWholeWithTheNodesOffer) {
  const RoundAssignment a = join_round(0, 0);
  ASSERT_EQ(client_.joins.size(), 1u);
  const rdzv::JoinRequest& sent = client_.joins[0];
  EXPECT_EQ(sent.job, job_terms());  // the value from the command line, unchanged
  EXPECT_EQ(sent.node.node_id, "node-b");
  EXPECT_EQ(sent.node.local_world_size, 2u);
  EXPECT_EQ(sent.node.node_rank_hint, 1u);
  EXPECT_EQ(sent.node.master_addr, "10.0.0.2");
  EXPECT_EQ(sent.node.master_port, 5000);
  EXPECT_EQ(a.rank_offset, 2);
  EXPECT_EQ(a.world_size, 4);
  EXPECT_EQ(a.master_addr, "10.0.0.1");
  EXPECT_EQ(a.max_restarts, 3);  // what the server agreed on reaches the agent
  join_round(1, 0);
  EXPECT_EQ(client_.connects, 1);  // the second join reuses the connection
}

// Issue 22: the client's message is the whole story, said once ("cannot reach ...: could not
// reach ..." repeated itself).
TEST_F(RendezvousCoordinatorTest, AnUnreachableServerFailsTheJoinWithTheClientsMessageOnce) {
  std::optional<Result<RoundAssignment>> got;
  coordinator_.join({2, "10.0.0.2", 5000}, [&](Result<RoundAssignment> a) { got = a; });
  const std::string unreachable =
      "could not reach the rendezvous server at head:29400 within 600.0 s (3 attempts): 3x "
      "connect: Connection refused (last at attempt 3)";
  client_.pending_connect(Status::unavailable(unreachable));
  ASSERT_TRUE(got && !got->ok());
  EXPECT_EQ(got->error_message(), unreachable);
  EXPECT_TRUE(client_.joins.empty());
}

TEST_F(RendezvousCoordinatorTest, OwnFailureAnsweredByAWorkerFailureRestartIsACountedRestart) {
  join_round(0, 0);
  auto& decision = report_failure(report_of_rank(2, 9));
  ASSERT_EQ(client_.failure_reports.size(), 1u);
  EXPECT_EQ(client_.failure_reports[0].exit_code, 9);
  EXPECT_FALSE(decision);  // the answer is a push, not the request's reply
  client_.failure_reports[0].done(Status());
  EXPECT_FALSE(decision);
  // Another node's failure in the same round came first: its report is the job's.
  const std::string first = nlohmann::json(report_of_rank(0, 4)).dump();
  client_.push(rdzv::RestartRequested{0, rdzv::RestartReason::kWorkerFailure, "x", first});
  ASSERT_TRUE(decision);
  EXPECT_TRUE(decision->restart);
  EXPECT_TRUE(decision->counted);
  ASSERT_EQ(decision->report.failures.size(), 1u);
  EXPECT_EQ(decision->report.root_cause().rank, 0);
  EXPECT_TRUE(events_.empty());  // an answer, not a separate event
}

// Found by fuzz/failure_report_fuzzer: a report whose strings are not UTF-8 (a worker's stderr
// line in Latin-1) made nlohmann's dump() throw out of report_failure, which aborted ddprun.
// The report now travels as valid JSON, the bad bytes as U+FFFD, and the other nodes read it.
TEST_F(RendezvousCoordinatorTest, FuzzOwnReportThatIsNotUtf8IsSentAsValidJsonNotACrash) {
  join_round(0, 0);
  FailureReport report = report_of_rank(2, 9);
  report.failures[0].stderr_tail = {"caf\xe9 au lait", "\xff\xfe"};
  report.failures[0].error_message = "bad \x80 byte";
  auto& decision = report_failure(report);
  ASSERT_EQ(client_.failure_reports.size(), 1u);
  const std::string sent = client_.failure_reports[0].failure_report;
  ASSERT_TRUE(nlohmann::json::accept(sent)) << sent;
  const FailureReport read = nlohmann::json::parse(sent).get<FailureReport>();
  ASSERT_EQ(read.failures.size(), 1u);
  EXPECT_EQ(read.failures[0].stderr_tail,
            (std::vector<std::string>{"caf\xef\xbf\xbd au lait", "\xef\xbf\xbd\xef\xbf\xbd"}));
  EXPECT_EQ(read.failures[0].error_message, "bad \xef\xbf\xbd byte");
  EXPECT_EQ(read.failures[0].rank, 2);
  client_.push(rdzv::RestartRequested{0, rdzv::RestartReason::kWorkerFailure, "x", sent});
  ASSERT_TRUE(decision);
  EXPECT_TRUE(decision->counted);
  EXPECT_EQ(decision->report.root_cause().rank, 2);
}

TEST_F(RendezvousCoordinatorTest, OwnFailureOvertakenByANodeLossRejoinsWithoutCountingIt) {
  join_round(0, 0);
  auto& decision = report_failure(report_of_rank(2, 9));
  client_.push(rdzv::RestartRequested{0, rdzv::RestartReason::kMemberLost, "node 'a' lost", ""});
  ASSERT_TRUE(decision);
  EXPECT_TRUE(decision->restart);
  EXPECT_FALSE(decision->counted);
  EXPECT_TRUE(decision->report.failures.empty());  // the agent shows its own
}

TEST_F(RendezvousCoordinatorTest, ARestartWithNoReportPendingAsksTheAgentToRejoin) {
  join_round(0, 0);
  client_.push(rdzv::RestartRequested{0, rdzv::RestartReason::kScaleUp, "node 'c' waits", ""});
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, CoordinatorEvent::Kind::kRejoin);
  EXPECT_NE(events_[0].reason.find("scale_up"), std::string::npos) << events_[0].reason;
  EXPECT_NE(events_[0].reason.find("node 'c' waits"), std::string::npos) << events_[0].reason;
}

TEST_F(RendezvousCoordinatorTest, RestartsExhaustedAnswerTheReportWithTheJobsReportAndCode) {
  join_round(0, 3);
  auto& decision = report_failure(report_of_rank(2, 9));
  client_.push(rdzv::JobFailed{rdzv::JobFailureReason::kRestartsExhausted, "no restarts left",
                               nlohmann::json(report_of_rank(0, 4)).dump(), 4});
  ASSERT_TRUE(decision);
  EXPECT_FALSE(decision->restart);
  EXPECT_EQ(decision->exit_code, 4);
  ASSERT_EQ(decision->report.failures.size(), 1u);
  EXPECT_EQ(decision->report.root_cause().rank, 0);
}

TEST_F(RendezvousCoordinatorTest, AJobFailureWhileRunningIsAnEventWithTheJobsReport) {
  join_round(0, 0);
  client_.push(rdzv::JobFailed{rdzv::JobFailureReason::kRestartsExhausted, "no restarts left",
                               nlohmann::json(report_of_rank(0, 4)).dump(), 4});
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, CoordinatorEvent::Kind::kJobFailed);
  EXPECT_EQ(events_[0].exit_code, 4);
  EXPECT_EQ(events_[0].report.root_cause().rank, 0);
}

TEST_F(RendezvousCoordinatorTest, AFailedReportRequestEndsTheJobWithOurOwnReport) {
  join_round(0, 0);
  auto& decision = report_failure(report_of_rank(2, 9));
  client_.failure_reports[0].done(Status::error("did not answer the worker-failure report"));
  ASSERT_TRUE(decision);
  EXPECT_FALSE(decision->restart);
  EXPECT_EQ(decision->exit_code, 9);
  EXPECT_EQ(decision->report.root_cause().rank, 2);
}

TEST_F(RendezvousCoordinatorTest, SuccessWaitsForTheWholeJob) {
  join_round(0, 0);
  std::optional<Status> done;
  coordinator_.report_success([&](Status s) { done = s; });
  EXPECT_EQ(client_.success_reports, 1);
  client_.pending_success(Status());
  EXPECT_FALSE(done);  // the exit barrier: only JobSucceeded ends it
  client_.push(rdzv::JobSucceeded{0});
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->ok());
}

// Another node was lost (or failed) while this one waited at the exit barrier: the job restarts
// as a whole, so the agent is asked to join again and the barrier's answer is dropped.
TEST_F(RendezvousCoordinatorTest, ARestartAtTheExitBarrierAsksTheAgentToRejoin) {
  join_round(0, 0);
  std::optional<Status> done;
  coordinator_.report_success([&](Status s) { done = s; });
  client_.pending_success(Status());
  client_.push(rdzv::RestartRequested{0, rdzv::RestartReason::kMemberLost, "node 'b' lost", ""});
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, CoordinatorEvent::Kind::kRejoin);
  EXPECT_NE(events_[0].reason.find("did not finish everywhere"), std::string::npos)
      << events_[0].reason;
  client_.push(rdzv::JobSucceeded{1});  // of a later round: not this barrier's answer
  EXPECT_FALSE(done);
}

TEST_F(RendezvousCoordinatorTest, ALostServerAtTheExitBarrierFailsTheJob) {
  join_round(0, 0);
  std::optional<Status> second;
  coordinator_.report_success([&](Status s) { second = s; });
  client_.push(rdzv::ConnectionLost{"lost the rendezvous server at head:29400: gone"});
  EXPECT_FALSE(second);  // the barrier is abandoned; the agent ends the job from the event
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, CoordinatorEvent::Kind::kJobFailed);
  EXPECT_EQ(events_[0].exit_code, 75);  // the rendezvous, not a worker
  EXPECT_NE(events_[0].reason.find("the rendezvous server at head:29400 was lost (lost the "
                                   "rendezvous server at head:29400: gone)"),
            std::string::npos)
      << events_[0].reason;
}

// Issue 22: losing the agent that hosts the rendezvous ended the job and blamed a survivor.
class HostLossTest : public RendezvousCoordinatorTest {
 protected:
  // Joins a round of three nodes whose server named node c's standby as the successor.
  void join_three_nodes(uint32_t restart_count) {
    rdzv::RoundAssigned a = round_of(0, restart_count);
    a.group_world_size = 3;
    a.successor_host = "10.0.0.3";
    a.successor_port = 4242;
    std::optional<Result<RoundAssignment>> got;
    coordinator_.join({2, "10.0.0.2", 5000}, [&](Result<RoundAssignment> r) { got = r; });
    std::exchange(client_.pending_connect, nullptr)(Status());
    std::exchange(client_.pending_join, nullptr)(a);
    ASSERT_TRUE(got && got->ok());
  }
  const rdzv::ServerAddress successor_{"10.0.0.3", 4242};
  const rdzv::ConnectionLost lost_{"lost the rendezvous server at head:29400: connection refused"};
};

TEST_F(HostLossTest, AFailureReportedAsTheHostDiesIsAnUncountedRestartAtTheSuccessor) {
  join_three_nodes(2);
  auto& decision = report_failure(report_of_rank(3, 1));  // gloo: connection closed by peer
  client_.push(lost_);
  ASSERT_TRUE(decision);
  EXPECT_TRUE(decision->restart);
  EXPECT_FALSE(decision->counted) << "a lost member does not consume a restart";
  ASSERT_EQ(client_.moved_to.size(), 1u);
  EXPECT_EQ(client_.moved_to[0], successor_);
  EXPECT_TRUE(events_.empty());
  // The next join connects afresh (to the successor) and carries the job's restarts there.
  std::optional<Result<RoundAssignment>> got;
  coordinator_.join({2, "10.0.0.2", 5000}, [&](Result<RoundAssignment> r) { got = r; });
  EXPECT_EQ(client_.connects, 2);
  std::exchange(client_.pending_connect, nullptr)(Status());
  ASSERT_EQ(client_.joins.size(), 2u);
  EXPECT_EQ(client_.joins[1].restarts_used, 2u);
}

// Issue 36: the successor's round waited a last call for survivors it could not know of. The
// join there names how many nodes of the last round come (all but the lost host); once a round
// has run at the successor, joins name none again.
TEST_F(HostLossTest, TheJoinAtTheSuccessorNamesTheSurvivorsComing) {
  join_three_nodes(0);
  EXPECT_EQ(client_.joins[0].survivors, 0u);
  client_.push(lost_);
  ASSERT_EQ(client_.moved_to.size(), 1u);
  std::optional<Result<RoundAssignment>> got;
  coordinator_.join({2, "10.0.0.2", 5000}, [&](Result<RoundAssignment> r) { got = r; });
  std::exchange(client_.pending_connect, nullptr)(Status());
  ASSERT_EQ(client_.joins.size(), 2u);
  EXPECT_EQ(client_.joins[1].survivors, 2u) << "three nodes, the host lost";
  std::exchange(client_.pending_join, nullptr)(round_of(0, 0));
  ASSERT_TRUE(got && got->ok());
  coordinator_.join({2, "10.0.0.2", 5000}, [](Result<RoundAssignment>) {});
  ASSERT_EQ(client_.joins.size(), 3u);
  EXPECT_EQ(client_.joins[2].survivors, 0u);
}

TEST_F(HostLossTest, RunningWorkersAreStoppedToRejoinAtTheSuccessor) {
  join_three_nodes(0);
  client_.push(lost_);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, CoordinatorEvent::Kind::kRejoin);
  EXPECT_NE(events_[0].reason.find("10.0.0.3:4242"), std::string::npos) << events_[0].reason;
  EXPECT_EQ(client_.moved_to.size(), 1u);
}

TEST_F(HostLossTest, AJoinCutShortByTheLostHostGoesOnAtTheSuccessor) {
  join_three_nodes(1);
  std::optional<Result<RoundAssignment>> got;
  coordinator_.join({2, "10.0.0.2", 5000}, [&](Result<RoundAssignment> r) { got = r; });
  std::exchange(client_.pending_join, nullptr)(Status::unavailable(lost_.message));
  EXPECT_FALSE(got) << "the join goes on";
  ASSERT_EQ(client_.moved_to.size(), 1u);
  std::exchange(client_.pending_connect, nullptr)(Status());
  ASSERT_TRUE(client_.pending_join);
  std::exchange(client_.pending_join, nullptr)(round_of(0, 1));
  ASSERT_TRUE(got && got->ok());
}

// A node stopped (SIGSTOP) or partitioned longer than heartbeat_timeout wakes to find the server
// gone: the job went on, or ended, without it. It must not start one of its own.
TEST_F(HostLossTest, ANodeThatWasItselfCutOffDoesNotMoveTheRendezvous) {
  join_three_nodes(0);
  client_.good_standing = false;
  client_.push(lost_);
  EXPECT_TRUE(client_.moved_to.empty());
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, CoordinatorEvent::Kind::kJobFailed);
  EXPECT_EQ(events_[0].exit_code, 75);
}

TEST_F(HostLossTest, TooFewSurvivorsEndTheJobWithTheLostHostAsRootCauseAnd75) {
  join_round(0, 0);  // two nodes, and the job needs two
  auto& decision = report_failure(report_of_rank(3, 1));
  client_.push(lost_);
  ASSERT_TRUE(decision);
  EXPECT_FALSE(decision->restart);
  EXPECT_EQ(decision->exit_code, 75);
  EXPECT_NE(decision->report.cause.find("the rendezvous server at head:29400 was lost"),
            std::string::npos);
  EXPECT_NE(decision->report.cause.find("run ddp-rendezvous"), std::string::npos);
  EXPECT_TRUE(client_.moved_to.empty());
}

TEST_F(RendezvousCoordinatorTest, NothingReachesTheAgentAfterClose) {
  join_round(0, 0);
  auto& decision = report_failure(report_of_rank(2, 9));
  coordinator_.close();
  client_.push(rdzv::RestartRequested{0, rdzv::RestartReason::kWorkerFailure, "x", ""});
  client_.push(rdzv::JobFailed{rdzv::JobFailureReason::kTooFewNodes, "too few", "", 1});
  EXPECT_FALSE(decision);
  EXPECT_TRUE(events_.empty());
  std::optional<bool> closed;
  coordinator_.close_gracefully([&] { closed = true; });
  EXPECT_TRUE(client_.closed);
  EXPECT_TRUE(closed);
}

TEST_F(RendezvousCoordinatorTest, ProgressTravelsBetweenTheAgentAndTheServerByGlobalRank) {
  join_round(0, 0);
  EXPECT_TRUE(coordinator_.shares_progress());
  RankProgress mine;
  mine.rank = 2;
  mine.node = "10.0.0.2";
  mine.local_rank = 0;
  mine.last_step = 41;
  mine.heartbeat_age = Millis(120);
  mine.busy = std::chrono::microseconds(153'000);
  std::optional<rdzv::StragglerFinding> stragglers;
  coordinator_.share_progress({mine}, 1500,
                              [&](const rdzv::StragglerFinding& f) { stragglers = f; });
  ASSERT_EQ(client_.shared_progress.size(), 1u);
  EXPECT_EQ(client_.shared_progress[0],
            (std::vector<rdzv::RankProgressEntry>{{2, 0, 41, 120, true, 0, "", 153'000}}));
  EXPECT_EQ(client_.shared_threshold, 1500u);
  // The server's answer reaches the agent as it came.
  const rdzv::StragglerFinding answer{1500, 4, 100'000, {{2, 0, "10.0.0.2", 153'000}}};
  ASSERT_TRUE(client_.pending_stragglers);
  client_.pending_stragglers(answer);
  ASSERT_TRUE(stragglers);
  EXPECT_EQ(*stragglers, answer);

  std::optional<Result<std::vector<RankProgress>>> got;
  coordinator_.job_progress([&](Result<std::vector<RankProgress>> r) { got = std::move(r); });
  ASSERT_TRUE(client_.pending_progress);
  client_.pending_progress(
      std::vector<rdzv::NodeProgress>{{"gpu-b:77:123", "10.0.0.3", 1, {{3, 1, -1, 5000, false}}}});
  ASSERT_TRUE(got && got->ok());
  ASSERT_EQ(got->value().size(), 1u);
  const RankProgress& remote = got->value()[0];
  EXPECT_EQ(remote.rank, 3);
  EXPECT_EQ(remote.node, "gpu-b:77");  // named as every line names a node (node_name.h)
  EXPECT_FALSE(remote.last_step);      // -1 on the wire: it never reported a step
  EXPECT_FALSE(remote.heartbeat_seen);
  EXPECT_EQ(remote.heartbeat_age, Millis(5000));
}

}  // namespace
}  // namespace ddprun::agent
