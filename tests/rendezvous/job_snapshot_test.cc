// A job's durable state (job_snapshot.h) on a fake clock: what a restarted daemon rebuilds from
// the bytes it stored, and how the rebuilt job treats nodes that do or do not resume.
#include "rendezvous/server/job_snapshot.h"
#include "tests/support/test_seed.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

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
    const state::StoredJob stored = encode_job_snapshot(*state_, {{"a", 11}, {"b", 22}});
    clock_.advance(later);
    auto snap = decode_job_snapshot("job", stored, clock_.steady_now());
    EXPECT_TRUE(snap.ok()) << snap.error_message();
    if (tokens) *tokens = snap->tokens;
    return std::move(*snap->round);
  }

  FakeClock clock_;
  JobOptions options_;
  std::optional<RoundState> state_;
};

// What encode_job_snapshot wrote for the fixture's running 2-node job in format 2 (still read).
constexpr const char* kFormat2Snapshot =
    R"({"round":{"barrier":false,"expected_total":0,"min_reached":false,"next_join_seq":2,)"
    R"("nodes":{"a":{"expected":false,"group_rank":0,"join_seq":0,"local_world_size":2,)"
    R"("master_addr":"addr-a","master_port":1000,"state":"member","succeeded":false},)"
    R"("b":{"expected":false,"group_rank":1,"join_seq":1,"local_world_size":2,)"
    R"("master_addr":"addr-b","master_port":1000,"state":"member","succeeded":false}},)"
    R"("options":{"agent_store":true,"exit_barrier_timeout_ms":300000,)"
    R"("heartbeat_timeout_ms":200,"join_timeout_ms":600000,"last_call_timeout_ms":30000,)"
    R"("max_nodes":2,"max_restarts":3,"min_nodes":2},"phase":"running","restart_count":0,)"
    R"("round":0},"tokens":{"a":11,"b":22},"v":2})";

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
    ASSERT_TRUE(state_
                    ->join(NodeInfo{id, 2, {}, std::string("addr-") + id, 1000}, options_,
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
  auto garbage = decode_job_snapshot("job-x", {"{not json", {}}, clock_.steady_now());
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error_message().find("job 'job-x'"), std::string::npos);
  auto partial =
      decode_job_snapshot("job-x", {R"({"v":1,"round":{"phase":1}})", {}}, clock_.steady_now());
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error_message().find("unreadable"), std::string::npos);
  auto newer = decode_job_snapshot("job-x", {R"({"v":99})", {}}, clock_.steady_now());
  ASSERT_FALSE(newer.ok());
  EXPECT_TRUE(newer.status().is_refused());
  EXPECT_NE(newer.error_message().find("newer ddp-rendezvous"), std::string::npos);
  // A node's record: named, whether unreadable, newer, or without a job round to belong to.
  state::StoredJob stored = encode_job_snapshot(*state_, {{"a", 11}, {"b", 22}});
  stored.nodes["b"] = "[1]";
  auto bad_node = decode_job_snapshot("job-x", stored, clock_.steady_now());
  ASSERT_FALSE(bad_node.ok());
  EXPECT_NE(bad_node.error_message().find("node 'b': not a JSON object"), std::string::npos)
      << bad_node.error_message();
  stored.nodes["b"] = R"({"v":3,"local_world_size":1e30})";
  auto fraction = decode_job_snapshot("job-x", stored, clock_.steady_now());
  ASSERT_FALSE(fraction.ok()) << "a number with an exponent is refused, not converted";
  EXPECT_NE(fraction.error_message().find("node 'b': a number that is not an integer"),
            std::string::npos)
      << fraction.error_message();
  stored.nodes["b"] = R"({"v":4})";
  EXPECT_TRUE(decode_job_snapshot("job-x", stored, clock_.steady_now()).status().is_refused());
  stored.nodes["b"] = R"({"v":3,"state":"member"})";
  auto partial_node = decode_job_snapshot("job-x", stored, clock_.steady_now());
  ASSERT_FALSE(partial_node.ok());
  EXPECT_NE(partial_node.error_message().find("node 'b'"), std::string::npos)
      << partial_node.error_message();
}

// Format 1, as daemons before format 2 stored it (enums as integers): a failed job whose nodes
// are a member, an idle node, a standby and a pending one. Still read, with the integers'
// meaning of the time, whatever the enums' order is now.
constexpr const char* kFormat1Snapshot =
    R"({"round":{"barrier":false,"expected_total":2,)"
    R"("failure":{"exit_code":7,"message":"worker failed","reason":1,"report":"{}"},)"
    R"("min_reached":true,"next_join_seq":5,"nodes":{)"
    R"("a":{"expected":true,"group_rank":0,"join_seq":0,"local_world_size":2,)"
    R"("master_addr":"addr-a","master_port":1000,"state":3,"succeeded":false},)"
    R"("b":{"expected":true,"group_rank":1,"join_seq":1,"local_world_size":2,)"
    R"("master_addr":"addr-b","master_port":1000,"state":0,"succeeded":false},)"
    R"("c":{"expected":false,"join_seq":3,"local_world_size":1,)"
    R"("master_addr":"addr-c","master_port":1000,"state":2,"succeeded":false},)"
    R"("d":{"expected":false,"join_seq":4,"local_world_size":1,)"
    R"("master_addr":"addr-d","master_port":1000,"state":1,"succeeded":false}},)"
    R"("options":{"agent_store":true,"exit_barrier_timeout_ms":300000,)"
    R"("heartbeat_timeout_ms":200,"join_timeout_ms":600000,"last_call_timeout_ms":30000,)"
    R"("max_nodes":4,"max_restarts":0,"min_nodes":2},)"
    R"("phase":3,"restart_count":0,"round":1},"tokens":{"a":11,"b":22},"v":1})";

TEST_F(JobSnapshotTest, Format1StateIsStillReadWithItsIntegersMeaning) {
  auto snap = decode_job_snapshot("job", {kFormat1Snapshot, {}}, clock_.steady_now());
  ASSERT_TRUE(snap.ok()) << snap.error_message();
  ASSERT_TRUE(snap->round);
  const RoundState& r = *snap->round;
  EXPECT_EQ(r.phase(), RoundState::Phase::kFailed);
  EXPECT_EQ(r.options().max_nodes, 4u);
  EXPECT_EQ(snap->tokens, (std::map<std::string, uint64_t>{{"a", 11}, {"b", 22}}));
  auto told = r.catch_up("a");
  ASSERT_TRUE(told && std::holds_alternative<JobFailed>(*told));
  EXPECT_EQ(std::get<JobFailed>(*told).reason, JobFailureReason::kRestartsExhausted);
  EXPECT_TRUE(snap->whole_record) << "its nodes need records of their own";
  // Written again, it is format 3, by name.
  const state::StoredJob again = encode_job_snapshot(r, snap->tokens);
  std::string all = again.job;
  for (const auto& [id, record] : again.nodes) all += record;
  for (const char* name :
       {R"("state":"member")", R"("state":"idle")", R"("state":"standby")", R"("state":"pending")",
        R"("phase":"failed")", R"("reason":"restarts_exhausted")", R"("v":3)"}) {
    EXPECT_NE(all.find(name), std::string::npos) << name << " not in " << all;
  }
}

// What encode_job_snapshot writes for the same job in format 3: the job's record and a
// record per node with its token and the join that made it a member.
constexpr const char* kFormat3Job =
    R"({"round":{"barrier":false,"expected_total":0,"min_reached":false,"next_join_seq":2,)"
    R"("options":{"agent_store":true,"exit_barrier_timeout_ms":300000,)"
    R"("heartbeat_timeout_ms":200,"join_timeout_ms":600000,"last_call_timeout_ms":30000,)"
    R"("max_nodes":2,"max_restarts":3,"min_nodes":2},"phase":"running","restart_count":0,)"
    R"("round":0},"v":3})";
constexpr const char* kFormat3NodeA =
    R"({"expected":false,"group_rank":0,"join_request":7,"join_seq":0,"local_world_size":2,)"
    R"("master_addr":"addr-a","master_port":1000,"state":"member","succeeded":false,)"
    R"("token":11,"v":3})";

// Format 3 pinned byte for byte (a change to what is stored must be a new format); format 2
// reads into the same job.
TEST_F(JobSnapshotTest, Format3IsWhatIsWrittenAndFormat2ReadsTheSame) {
  const state::StoredJob stored = encode_job_snapshot(*state_, {{"a", 11}, {"b", 22}}, {{"a", 7}});
  EXPECT_EQ(stored.job, kFormat3Job);
  ASSERT_EQ(stored.nodes.size(), 2u);
  EXPECT_EQ(stored.nodes.at("a"), kFormat3NodeA);
  auto snap = decode_job_snapshot("job", stored, clock_.steady_now());
  ASSERT_TRUE(snap.ok()) << snap.error_message();
  EXPECT_FALSE(snap->whole_record);
  EXPECT_EQ(snap->join_requests, (std::map<std::string, uint32_t>{{"a", 7}}));
  auto old = decode_job_snapshot("job", {kFormat2Snapshot, {}}, clock_.steady_now());
  ASSERT_TRUE(old.ok()) << old.error_message();
  EXPECT_EQ(old->round->phase(), RoundState::Phase::kRunning);
  EXPECT_EQ(encode_job_snapshot(*old->round, old->tokens, {{"a", 7}}).nodes, stored.nodes);
  EXPECT_EQ(encode_job_snapshot(*old->round, old->tokens).job, stored.job);
}

TEST_F(JobSnapshotTest, UnknownNamesAreRefusedNamingWhatAndTheKnownNames) {
  std::string bytes = kFormat2Snapshot;
  bytes.replace(bytes.find(R"("phase":"running")"), 17, R"("phase":"paused")");
  auto phase = decode_job_snapshot("job-x", {bytes, {}}, clock_.steady_now());
  ASSERT_FALSE(phase.ok());
  EXPECT_TRUE(phase.status().is_malformed());
  EXPECT_NE(phase.error_message().find("job 'job-x'"), std::string::npos);
  EXPECT_NE(phase.error_message().find(R"(the round's phase has an unknown value "paused")"),
            std::string::npos)
      << phase.error_message();
  EXPECT_NE(phase.error_message().find("known: gathering, running, succeeded, failed"),
            std::string::npos)
      << phase.error_message();
  bytes = kFormat2Snapshot;
  bytes.replace(bytes.find(R"("state":"member")"), 16, R"("state":3)");
  auto state = decode_job_snapshot("job-x", {bytes, {}}, clock_.steady_now());
  ASSERT_FALSE(state.ok()) << "format 2 stores names, not integers";
  EXPECT_NE(state.error_message().find("node 'a': state has an unknown value 3"), std::string::npos)
      << state.error_message();
}

// A restored job tells every node where the job is with catch_up_all (one pass: per node,
// catch_up sorts the members, and a restart of 10,000 nodes took minutes). Both say the same.
TEST(JobSnapshotCatchUpTest, CatchUpAllSaysWhatCatchUpSaysForEachNode) {
  FakeClock clock;
  JobOptions options;
  options.min_nodes = 40;
  options.max_nodes = 40;
  RoundState state("job", options, clock.steady_now());
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) {
    ids.push_back("n" + std::to_string(i));
    ASSERT_TRUE(state
                    .join(NodeInfo{ids.back(), 1 + static_cast<uint32_t>(i % 3), {}, "a", 1},
                          options, clock.steady_now())
                    .ok());
  }
  ASSERT_EQ(state.phase(), RoundState::Phase::kRunning);
  ids.push_back("unknown");
  const auto all = state.catch_up_all(ids);
  ASSERT_EQ(all.size(), 40u);
  uint32_t global_ranks = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].first, ids[i]);
    auto one = state.catch_up(ids[i]);
    ASSERT_TRUE(one);
    const auto& a = std::get<RoundAssigned>(all[i].second);
    const auto& b = std::get<RoundAssigned>(*one);
    EXPECT_EQ(a.group_rank, b.group_rank);
    EXPECT_EQ(a.rank_offset, b.rank_offset);
    EXPECT_EQ(a.world_size, b.world_size);
    EXPECT_EQ(a.group_world_size, 40u);
    global_ranks += a.local_world_size;
  }
  EXPECT_EQ(std::get<RoundAssigned>(all[0].second).world_size, global_ranks);
  EXPECT_FALSE(state.catch_up("unknown"));
}

// Issue 25: a save writes the job's record and only the nodes RoundState says changed. Through
// random joins, leaves, losses, reports and timeouts of a 6-node elastic job, the records
// kept that way must always equal the whole job encoded afresh: a change that forgot to mark
// its node would show here as a stale record.
TEST(JobSnapshotChangesTest, TheChangedNodesKeepTheRecordsEqualToTheWholeJob) {
  const unsigned seed = ::ddprun::testing::test_seed();
  SCOPED_TRACE("DDPRUN_TEST_SEED=" + std::to_string(seed));
  std::mt19937 random(seed);
  FakeClock clock;
  JobOptions options;
  options.min_nodes = 2;
  options.max_nodes = 4;
  options.max_restarts = 1000;
  options.join_timeout = milliseconds(5000);
  options.last_call_timeout = milliseconds(50);
  options.heartbeat_timeout = milliseconds(100);
  options.exit_barrier_timeout = milliseconds(300);
  std::optional<RoundState> state;
  state::StoredJob kept;
  for (int step = 0; step < 4000; ++step) {
    if (!state || state->finished()) {
      state.emplace("job", options, clock.steady_now());
      kept = {};
    }
    const std::string id = "n" + std::to_string(random() % 6);
    const uint64_t round = state->round();
    switch (random() % 8) {
      case 0:
      case 1:
        (void)state->join(NodeInfo{id, 1 + static_cast<uint32_t>(random() % 2), {}, "addr", 1},
                          options, clock.steady_now());
        break;
      case 2:
        state->leave(id, clock.steady_now());
        break;
      case 3:
        state->detach(id, clock.steady_now());
        break;
      case 4:
        state->reattach(id);
        break;
      case 5:
        (void)state->report_failure(id, round, "{}", 1, clock.steady_now());
        break;
      case 6:
        (void)state->report_success(id, round, clock.steady_now());
        break;
      default:
        clock.advance(milliseconds(random() % 120));
        state->advance(clock.steady_now());
    }
    kept.job = encode_job_record(*state);
    for (const std::string& changed : state->take_changed_nodes()) {
      if (state->knows(changed)) {
        kept.nodes[changed] = encode_node_record(*state, changed, 0, 0);
      } else {
        kept.nodes.erase(changed);
      }
    }
    ASSERT_EQ(kept, encode_job_snapshot(*state, {})) << "after step " << step;
  }
}

}  // namespace
}  // namespace ddprun::rdzv
