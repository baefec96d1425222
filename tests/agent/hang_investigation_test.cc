// The cross-node wait of a hang's investigation against a scripted coordinator: it shares this
// node's ranks, reads the job's progress until every rank is ready or the time is up, and hands
// over every rank it knows. The pause between reads and the deadline run on a fake clock.
#include "agent/progress/hang_investigation.h"

#include <gtest/gtest.h>

#include <deque>

#include "tests/agent/fake_agent_parts.h"

namespace ddprun::agent {
namespace {

using namespace std::chrono_literals;

// Answers each job_progress with the next scripted answer (the last one repeats).
class InvestigationCoordinator : public Coordinator {
 public:
  std::deque<Result<std::vector<RankProgress>>> answers;
  std::vector<std::vector<RankProgress>> shared;
  int queries = 0;

  void join(const JoinOffer&, std::function<void(Result<RoundAssignment>)>) override {}
  void report_failure(const FailureReport&, std::function<void(FailureDecision)>) override {}
  void report_success(std::function<void(Status)>) override {}
  void set_event_handler(std::function<void(const CoordinatorEvent&)>) override {}
  bool shares_progress() const override { return true; }
  void share_progress(const std::vector<RankProgress>& ranks, uint32_t, StragglerHandler) override {
    shared.push_back(ranks);
  }
  void job_progress(std::function<void(Result<std::vector<RankProgress>>)> done) override {
    ++queries;
    auto answer = answers.front();
    if (answers.size() > 1) answers.pop_front();
    done(std::move(answer));
  }
  void close() override {}
};

RankProgress rank(int r, RankActivity activity) {
  RankProgress p;
  p.rank = r;
  p.node = r < 2 ? "a" : "b";
  p.local_rank = r % 2;
  p.activity = activity;
  return p;
}

std::vector<RankProgress> ranks(std::initializer_list<std::pair<int, RankActivity>> list) {
  std::vector<RankProgress> out;
  for (auto [r, a] : list) out.push_back(rank(r, a));
  return out;
}

constexpr auto kStop = RankActivity::kStopping;
constexpr auto kRun = RankActivity::kUnknown;
constexpr auto kWait = RankActivity::kInCollective;
constexpr auto kBusyElsewhere = RankActivity::kElsewhere;

class HangInvestigationTest : public ::testing::Test {
 protected:
  std::optional<std::vector<RankProgress>> run(bool stacks, std::vector<RankProgress> local,
                                               Millis timeout) {
    std::optional<std::vector<RankProgress>> got;
    auto done = [&](std::vector<RankProgress> all) { got = std::move(all); };
    if (stacks) {
      investigation.await_stacks(std::move(local), 4, timeout, done);
    } else {
      investigation.await_verdicts(std::move(local), 4, timeout, done);
    }
    // Each pause between two reads passes on the fake clock; bounded by the steps allowed.
    for (int step = 0; step < 10'000 && !got && timer.armed(); ++step) {
      clock.advance(kPoll);
      timer.fire_if_due();
    }
    return got;
  }

  static constexpr Millis kPoll{50};
  FakeClock clock;
  testing::FakeClockTimer timer{clock};
  InvestigationCoordinator coordinator;
  HangInvestigation investigation{coordinator, timer, clock, HangInvestigationOptions{kPoll}};
};

TEST_F(HangInvestigationTest, WaitsUntilEveryOtherNodeHasItsVerdict) {
  coordinator.answers = {ranks({{0, kStop}, {1, kStop}, {2, kRun}, {3, kRun}}),
                         ranks({{0, kStop}, {1, kStop}, {2, kStop}, {3, kRun}}),
                         ranks({{0, kStop}, {1, kStop}, {2, kStop}, {3, kStop}})};
  auto all = run(false, ranks({{0, kStop}, {1, kStop}}), 10s);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 4u);
  EXPECT_EQ(coordinator.queries, 3);
  ASSERT_EQ(coordinator.shared.size(), 1u);  // this node's ranks, shared first
  EXPECT_EQ(coordinator.shared[0].size(), 2u);
}

TEST_F(HangInvestigationTest, GivesUpAtItsDeadlineWithWhatItKnows) {
  coordinator.answers = {ranks({{0, kStop}, {1, kStop}, {2, kRun}})};  // rank 3 never shared
  const SteadyTime started = clock.steady_now();
  auto all = run(false, ranks({{0, kStop}, {1, kStop}}), 100ms);
  ASSERT_TRUE(all);
  EXPECT_EQ(clock.steady_now() - started, 100ms);  // two pauses of 50 ms: read at 0, 50, 100
  EXPECT_EQ(coordinator.queries, 3);
  EXPECT_EQ(all->size(), 3u);
}

TEST_F(HangInvestigationTest, StacksAreAwaitedUntilEveryRankIsRead) {
  coordinator.answers = {ranks({{0, kWait}, {1, kWait}, {2, kStop}, {3, kStop}}),
                         ranks({{0, kWait}, {1, kWait}, {2, kWait}, {3, kBusyElsewhere}})};
  auto all = run(true, ranks({{0, kWait}, {1, kWait}}), 10s);
  ASSERT_TRUE(all);
  EXPECT_EQ(coordinator.queries, 2);
  EXPECT_EQ(all->at(3).activity, kBusyElsewhere);
}

TEST_F(HangInvestigationTest, ThisNodesOwnRanksWinOverWhatTheServerStillHolds) {
  // The server still holds this node's earlier "stopping" entries.
  coordinator.answers = {ranks({{0, kStop}, {1, kStop}, {2, kWait}, {3, kBusyElsewhere}})};
  auto all = run(true, ranks({{0, kWait}, {1, kWait}}), 10s);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ(all->at(0).activity, kWait);
  EXPECT_EQ(coordinator.queries, 1);
}

TEST_F(HangInvestigationTest, AnUnansweredQueryEndsTheWaitWithThisNodesRanks) {
  coordinator.answers = {Status::error("connection to the rendezvous lost")};
  auto all = run(true, ranks({{0, kWait}, {1, kBusyElsewhere}}), 10s);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 2u);
}

TEST_F(HangInvestigationTest, ACancelledWaitNeverCallsBack) {
  coordinator.answers = {ranks({{0, kStop}})};
  bool called = false;
  investigation.await_verdicts(ranks({{0, kStop}, {1, kStop}}), 4, 10s,
                               [&](std::vector<RankProgress>) { called = true; });
  EXPECT_TRUE(timer.armed());  // rank 2 and 3 are still awaited
  investigation.cancel();
  EXPECT_FALSE(timer.armed());
  clock.advance(1s);
  timer.fire_if_due();
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace ddprun::agent
