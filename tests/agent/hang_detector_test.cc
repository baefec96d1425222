// The hang detector on explicit timestamps (a fake clock), the cross-node culprit rules, and
// the root-cause line. Pure: no I/O, no real time.
#include "agent/progress/hang_detector.h"
#include "agent/progress/hang_culprits.h"

#include <gtest/gtest.h>

#include <chrono>

namespace ddprun::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const SteadyTime t0 = SteadyTime{} + std::chrono::hours(1);

HangDetectorOptions options(Millis hang, Millis first) { return HangDetectorOptions{hang, first}; }

std::vector<int> local_ranks(const HangVerdict& verdict) {
  std::vector<int> out;
  for (const auto& p : verdict.hung) out.push_back(p.local_rank);
  return out;
}

TEST(HangDetector, OffByDefaultButStillTracksProgress) {
  HangDetector detector(HangDetectorOptions{}, 2);
  EXPECT_FALSE(detector.enabled());
  detector.start(t0);
  EXPECT_TRUE(detector.heartbeat(0, 7, t0 + seconds(1)));
  EXPECT_EQ(detector.next_deadline(), std::nullopt);
  EXPECT_EQ(detector.check(t0 + std::chrono::hours(100)), std::nullopt);
  auto progress = detector.progress(t0 + seconds(11));
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress[0].last_step, 7);
  EXPECT_EQ(progress[0].silent_for, seconds(10));
  EXPECT_EQ(progress[1].state, RankState::kAwaitingFirstHeartbeat);
  EXPECT_EQ(progress[1].silent_for, seconds(11));
}

// Stragglers: each rank's busy time is the mean of its last kBusyWindowSteps reports.
TEST(HangDetector, ARanksBusyTimeIsTheMeanOverItsLastSteps) {
  using std::chrono::microseconds;
  HangDetector detector(HangDetectorOptions{}, 2);
  detector.start(t0);
  EXPECT_EQ(detector.progress(t0)[0].busy, std::nullopt);
  detector.heartbeat(0, 1, t0, microseconds(100));
  detector.heartbeat(0, 2, t0, microseconds(300));
  detector.heartbeat(0, std::nullopt, t0);  // a touch carries no busy time
  EXPECT_EQ(detector.progress(t0)[0].busy, microseconds(200));
  EXPECT_EQ(detector.progress(t0)[1].busy, std::nullopt);
  // A window later only the last kBusyWindowSteps count: the slow start is forgotten.
  for (std::size_t i = 0; i < kBusyWindowSteps; ++i) {
    detector.heartbeat(0, static_cast<std::int64_t>(3 + i), t0, microseconds(50));
  }
  EXPECT_EQ(detector.progress(t0)[0].busy, microseconds(50));
  detector.heartbeat(0, 100, t0, microseconds(50 + 20 * 10));  // one slow step moves it a little
  EXPECT_EQ(detector.progress(t0)[0].busy, microseconds(60));
  EXPECT_EQ(to_rank_progress(detector.progress(t0)[0], 4, "a").busy, microseconds(60));
}

TEST(HangDetector, NoFirstHeartbeatWithinItsTimeoutIsAHang) {
  HangDetector detector(options(seconds(30), seconds(120)), 2);
  detector.start(t0);
  EXPECT_EQ(detector.next_deadline(), t0 + seconds(120));
  EXPECT_EQ(detector.check(t0 + seconds(120) - milliseconds(1)), std::nullopt);
  auto verdict = detector.check(t0 + seconds(120));
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->at, t0 + seconds(120));
  EXPECT_EQ(local_ranks(*verdict), (std::vector<int>{0, 1}));
  EXPECT_EQ(verdict->hung[0].state, RankState::kAwaitingFirstHeartbeat);
  EXPECT_EQ(verdict->hung[0].silent_for, seconds(120));
  EXPECT_EQ(verdict->hung[0].last_heartbeat, std::nullopt);
  EXPECT_EQ(detector.phase(), HangDetector::Phase::kTripped);
  // Once: the agent acts on the first verdict.
  EXPECT_EQ(detector.next_deadline(), std::nullopt);
  EXPECT_EQ(detector.check(t0 + seconds(500)), std::nullopt);
}

TEST(HangDetector, FirstHeartbeatLimitIsNeverShorterThanTheHangTimeout) {
  HangDetector detector(options(seconds(300), seconds(60)), 1);
  detector.start(t0);
  EXPECT_EQ(detector.next_deadline(), t0 + seconds(300));
}

TEST(HangDetector, NoFirstHeartbeatLimitWatchesOnlyRanksThatBeat) {
  HangDetector detector(options(seconds(30), Millis(0)), 2);
  detector.start(t0);
  EXPECT_EQ(detector.next_deadline(), std::nullopt);
  detector.heartbeat(0, 1, t0 + seconds(5));
  EXPECT_EQ(detector.next_deadline(), t0 + seconds(35));
  detector.heartbeat(0, 2, t0 + seconds(30));
  EXPECT_EQ(detector.check(t0 + seconds(59)), std::nullopt);  // rank 1 never beat: not watched
  auto verdict = detector.check(t0 + seconds(60));
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(local_ranks(*verdict), (std::vector<int>{0}));
}

TEST(HangDetector, SilenceAfterAHeartbeatIsAHang) {
  HangDetector detector(options(seconds(30), seconds(120)), 2);
  detector.start(t0);
  detector.heartbeat(0, 1, t0 + seconds(10));
  detector.heartbeat(1, 1, t0 + seconds(10));
  detector.heartbeat(0, 2, t0 + seconds(20));
  EXPECT_EQ(detector.next_deadline(), t0 + seconds(40));  // rank 1's
  EXPECT_EQ(detector.check(t0 + seconds(39)), std::nullopt);
  auto verdict = detector.check(t0 + seconds(40));
  ASSERT_TRUE(verdict.has_value());
  ASSERT_EQ(local_ranks(*verdict), (std::vector<int>{1}));
  EXPECT_EQ(verdict->hung[0].state, RankState::kHeartbeating);
  EXPECT_EQ(verdict->hung[0].last_step, 1);
  EXPECT_EQ(verdict->hung[0].last_heartbeat, t0 + seconds(10));
  EXPECT_EQ(verdict->hung[0].silent_for, seconds(30));
}

TEST(HangDetector, SteadyHeartbeatsNeverTrip) {
  HangDetector detector(options(seconds(30), seconds(120)), 1);
  detector.start(t0);
  for (int step = 0; step < 1000; ++step) {
    const SteadyTime now = t0 + seconds(29) * step;
    ASSERT_EQ(detector.check(now), std::nullopt) << step;
    detector.heartbeat(0, step, now);
    EXPECT_EQ(detector.next_deadline(), now + seconds(30));
  }
}

// The agent's loop on a fake clock: wake at next_deadline(), check, re-arm.
TEST(HangDetector, DrivenByItsDeadlinesItTripsExactlyAtTheTimeout) {
  HangDetector detector(options(seconds(30), seconds(120)), 2);
  detector.start(t0);
  detector.heartbeat(0, 5, t0 + seconds(100));
  detector.heartbeat(1, 5, t0 + seconds(100));
  detector.heartbeat(1, 6, t0 + seconds(125));
  std::optional<HangVerdict> verdict;
  int wakeups = 0;
  while (auto deadline = detector.next_deadline()) {
    ++wakeups;
    if ((verdict = detector.check(*deadline))) break;
  }
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(wakeups, 1);
  EXPECT_EQ(verdict->at, t0 + seconds(130));
  EXPECT_EQ(local_ranks(*verdict), (std::vector<int>{0}));
}

TEST(HangDetector, HeartbeatWithoutStepKeepsTheLastStep) {
  HangDetector detector(options(seconds(30), seconds(120)), 1);
  detector.start(t0);
  detector.heartbeat(0, 41, t0 + seconds(1));
  detector.heartbeat(0, std::nullopt, t0 + seconds(2));
  auto p = detector.progress(t0 + seconds(3));
  EXPECT_EQ(p[0].last_step, 41);
  EXPECT_EQ(p[0].last_heartbeat, t0 + seconds(2));
  EXPECT_EQ(p[0].heartbeats, 2u);
  detector.heartbeat(0, 3, t0 + seconds(4));  // a reported step replaces (a restarted loop)
  EXPECT_EQ(detector.progress(t0 + seconds(4))[0].last_step, 3);
}

TEST(HangDetector, AHeartbeatStampedEarlierDoesNotMoveTimeBack) {
  HangDetector detector(options(seconds(30), seconds(120)), 1);
  detector.start(t0);
  detector.heartbeat(0, 2, t0 + seconds(20));
  detector.heartbeat(0, 3, t0 + seconds(10));
  EXPECT_EQ(detector.next_deadline(), t0 + seconds(50));
  EXPECT_EQ(detector.progress(t0 + seconds(20))[0].last_step, 3);
}

TEST(HangDetector, ExitedRanksAreNotWatched) {
  HangDetector detector(options(seconds(30), seconds(120)), 2);
  detector.start(t0);
  detector.heartbeat(0, 1, t0 + seconds(1));
  detector.worker_exited(1);  // never beat, then exited: not a hang
  EXPECT_EQ(detector.next_deadline(), t0 + seconds(31));
  detector.worker_exited(0);
  EXPECT_EQ(detector.next_deadline(), std::nullopt);
  EXPECT_EQ(detector.check(t0 + seconds(1000)), std::nullopt);
  EXPECT_FALSE(detector.heartbeat(0, 2, t0 + seconds(2)));
  EXPECT_EQ(detector.progress(t0)[1].state, RankState::kExited);
}

TEST(HangDetector, HeartbeatsBeforeStartOrForUnknownRanksAreRefused) {
  HangDetector detector(options(seconds(30), seconds(120)), 2);
  EXPECT_FALSE(detector.heartbeat(0, 1, t0));
  EXPECT_EQ(detector.next_deadline(), std::nullopt);
  EXPECT_EQ(detector.check(t0 + seconds(1000)), std::nullopt);
  detector.start(t0);
  EXPECT_FALSE(detector.heartbeat(2, 1, t0));
  EXPECT_FALSE(detector.heartbeat(-1, 1, t0));
  detector.worker_exited(7);  // ignored
  EXPECT_EQ(detector.progress(t0)[0].heartbeats, 0u);
}

TEST(HangDetector, EveryRankPastItsDeadlineIsInTheVerdict) {
  HangDetector detector(options(seconds(10), seconds(60)), 4);
  detector.start(t0);
  detector.heartbeat(0, 9, t0 + seconds(50));
  detector.heartbeat(2, 9, t0 + seconds(52));
  detector.heartbeat(3, 10, t0 + seconds(61));
  auto verdict = detector.check(t0 + seconds(62));  // 0 (at 60), 1 (at 60), 2 (at 62)
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(local_ranks(*verdict), (std::vector<int>{0, 1, 2}));
}

RankProgress rank(int r, std::string node, int local, std::optional<std::int64_t> step, Millis age,
                  bool seen = true) {
  RankProgress p;
  p.rank = r;
  p.node = std::move(node);
  p.local_rank = local;
  p.last_step = step;
  p.heartbeat_age = age;
  p.heartbeat_seen = seen;
  return p;
}

RankProgress doing(RankProgress p, RankActivity activity, std::string where = "") {
  p.activity = activity;
  p.where = std::move(where);
  return p;
}

std::vector<int> global_ranks(const CulpritFinding& f) {
  std::vector<int> out;
  for (const auto& c : f.culprits) out.push_back(c.rank);
  return out;
}

constexpr RankActivity kWaiting = RankActivity::kInCollective;
constexpr RankActivity kBusy = RankActivity::kElsewhere;

TEST(HangCulprits, TheRankBehindIsNamedNotThoseWaitingForIt) {
  // Rank 2 stopped before step 1235's collective; the others wait inside it, silent as well,
  // and some of them with a heartbeat older than the culprit's.
  const std::vector<RankProgress> ranks{
      rank(0, "a", 0, 1235, seconds(301)), rank(1, "a", 1, 1235, seconds(300)),
      rank(2, "b", 0, 1234, seconds(300)), rank(3, "b", 1, 1235, seconds(305))};
  CulpritFinding f = find_hang_culprits(ranks);
  EXPECT_EQ(f.basis, CulpritFinding::Basis::kLowestStep);
  EXPECT_EQ(global_ranks(f), (std::vector<int>{2}));
  EXPECT_EQ(f.culprits[0].node, "b");
}

// The bug of issue 22: rank 1 sleeps inside step 7, rank 0 waits in barrier; both reported step
// 7 within microseconds, and rank 0's heartbeat happened to be the older one.
TEST(HangCulprits, AtTheSameStepTheRankNotInACollectiveIsNamedWhateverTheHeartbeatAges) {
  const std::vector<RankProgress> ranks{
      doing(rank(0, "a", 0, 7, milliseconds(4'001)), kWaiting,
            "barrier at distributed_c10d.py:3152"),
      doing(rank(1, "a", 1, 7, milliseconds(4'000)), kBusy, "train_step at train.py:40")};
  CulpritFinding f = find_hang_culprits(ranks);
  EXPECT_EQ(f.basis, CulpritFinding::Basis::kNotInCollective);
  EXPECT_EQ(global_ranks(f), (std::vector<int>{1}));
  EXPECT_EQ(format_hang_root_cause(f.culprits[0], f),
            "rank 1 (node a, local_rank 1) hung: no progress for 4 s after step 7, in train_step "
            "at train.py:40");
}

TEST(HangCulprits, AcrossNodesTheOnlyRankNotWaitingIsNamed) {
  const std::vector<RankProgress> ranks{doing(rank(0, "a", 0, 3, seconds(5)), kWaiting),
                                        doing(rank(1, "a", 1, 3, seconds(6)), kWaiting),
                                        doing(rank(2, "b", 0, 3, seconds(7)), kWaiting),
                                        doing(rank(3, "b", 1, 3, seconds(4)), kBusy)};
  EXPECT_EQ(global_ranks(find_hang_culprits(ranks)), (std::vector<int>{3}));
}

TEST(HangCulprits, ARankWithoutAStackIsNamedWhenEveryOtherOneWasWaiting) {
  const std::vector<RankProgress> ranks{
      doing(rank(0, "a", 0, 3, seconds(5)), kWaiting),
      doing(rank(1, "a", 1, 3, seconds(5)), kWaiting),
      doing(rank(2, "b", 0, 3, seconds(5)), RankActivity::kUnreadable)};
  CulpritFinding f = find_hang_culprits(ranks);
  EXPECT_EQ(f.basis, CulpritFinding::Basis::kNotSeenWaiting);
  EXPECT_EQ(global_ranks(f), (std::vector<int>{2}));
}

TEST(HangCulprits, WhenNothingTellsTheRanksApartEveryOneIsNamedAndTheReportSaysSo) {
  const std::vector<RankProgress> all_waiting{doing(rank(0, "a", 0, 3, seconds(5)), kWaiting),
                                              doing(rank(1, "a", 1, 3, seconds(9)), kWaiting)};
  CulpritFinding f = find_hang_culprits(all_waiting);
  EXPECT_EQ(f.basis, CulpritFinding::Basis::kUndetermined);
  EXPECT_EQ(global_ranks(f), (std::vector<int>{0, 1}));  // not the older heartbeat alone
  EXPECT_EQ(format_hang_root_cause(f.culprits[0], f),
            "rank 0 (node a, local_rank 0) hung: no progress for 5 s after step 3; which rank "
            "stopped first cannot be told: every rank at step 3 was waiting in a collective");
  const std::vector<RankProgress> all_busy{doing(rank(0, "a", 0, 3, seconds(5)), kBusy),
                                           doing(rank(1, "a", 1, 3, seconds(5)), kBusy)};
  EXPECT_EQ(find_hang_culprits(all_busy).undetermined_because,
            "no rank at step 3 was waiting in a collective");
  // Programs that print no stack and only touch their file: nothing to go by.
  const std::vector<RankProgress> touch_only{rank(0, "a", 0, std::nullopt, seconds(31)),
                                             rank(1, "a", 1, std::nullopt, seconds(95))};
  f = find_hang_culprits(touch_only);
  EXPECT_EQ(f.basis, CulpritFinding::Basis::kUndetermined);
  EXPECT_EQ(f.undetermined_because, "no rank without a step showed where it was (no stack)");
}

TEST(HangCulprits, SeveralRanksBehindAreNamedNarrowedToThoseNotWaiting) {
  const std::vector<RankProgress> ranks{
      rank(5, "b", 1, 10, seconds(40)), rank(1, "a", 1, 10, seconds(40)),
      rank(0, "a", 0, 10, seconds(20)), rank(4, "b", 0, 11, seconds(50))};
  CulpritFinding f = find_hang_culprits(ranks);
  EXPECT_EQ(f.basis, CulpritFinding::Basis::kLowestStep);
  EXPECT_EQ(global_ranks(f), (std::vector<int>{0, 1, 5}));  // by global rank
  std::vector<RankProgress> seen = ranks;
  seen[0] = doing(seen[0], kWaiting);
  seen[1] = doing(seen[1], kBusy, "load at data.py:88");
  seen[2] = doing(seen[2], kWaiting);
  f = find_hang_culprits(seen);
  EXPECT_EQ(global_ranks(f), (std::vector<int>{1}));
  EXPECT_EQ(format_hang_root_cause(f.culprits[0], f),
            "rank 1 (node a, local_rank 1) hung: no progress for 40 s after step 10, in load at "
            "data.py:88");
}

TEST(HangCulprits, NoStepAtAllCountsAsFurthestBehind) {
  const std::vector<RankProgress> ranks{rank(0, "a", 0, 0, seconds(600)),
                                        rank(1, "a", 1, std::nullopt, seconds(600), false)};
  EXPECT_EQ(global_ranks(find_hang_culprits(ranks)), (std::vector<int>{1}));
}

TEST(HangCulprits, NothingToNameWithoutRanks) {
  CulpritFinding f = find_hang_culprits({});
  EXPECT_EQ(f.basis, CulpritFinding::Basis::kNone);
  EXPECT_TRUE(f.culprits.empty());
}

TEST(HangCulprits, DetectorProgressBecomesAJobWideRecord) {
  HangDetector detector(options(seconds(30), seconds(120)), 2);
  detector.start(t0);
  detector.heartbeat(1, 1234, t0 + seconds(5));
  auto progress = detector.progress(t0 + seconds(305));
  RankProgress beat = to_rank_progress(progress[1], 3, "b");
  EXPECT_EQ(format_hang_root_cause(beat),
            "rank 3 (node b, local_rank 1) hung: no progress for 300 s after step 1234");
  RankProgress silent = to_rank_progress(progress[0], 2, "b");
  EXPECT_FALSE(silent.heartbeat_seen);
  EXPECT_EQ(silent.heartbeat_age, seconds(305));
}

TEST(HangRootCause, LinesForEachCase) {
  EXPECT_EQ(format_hang_root_cause(rank(3, "b", 1, 1234, seconds(300))),
            "rank 3 (node b, local_rank 1) hung: no progress for 300 s after step 1234");
  EXPECT_EQ(format_hang_root_cause(rank(3, "b", 1, std::nullopt, seconds(300))),
            "rank 3 (node b, local_rank 1) hung: no progress for 300 s (it never reported a step)");
  EXPECT_EQ(format_hang_root_cause(rank(0, "node-7", 0, std::nullopt, seconds(600), false)),
            "rank 0 (node node-7, local_rank 0) hung: no heartbeat in 600 s since it started");
  EXPECT_EQ(format_hang_root_cause(rank(1, "a", 1, 0, milliseconds(1500))),
            "rank 1 (node a, local_rank 1) hung: no progress for 1.5 s after step 0");
}

TEST(HangRootCause, SecondsAreWholeOrOneDecimalBelowTen) {
  EXPECT_EQ(format_hang_seconds(seconds(300)), "300");
  EXPECT_EQ(format_hang_seconds(milliseconds(300'400)), "300");
  EXPECT_EQ(format_hang_seconds(milliseconds(12'600)), "13");
  EXPECT_EQ(format_hang_seconds(milliseconds(1500)), "1.5");
  EXPECT_EQ(format_hang_seconds(milliseconds(250)), "0.3");
  EXPECT_EQ(format_hang_seconds(milliseconds(999)), "1");
  EXPECT_EQ(format_hang_seconds(milliseconds(9'960)), "10");
  EXPECT_EQ(format_hang_seconds(milliseconds(40)), "0");
  EXPECT_EQ(format_hang_seconds(milliseconds(-5)), "0");
}

}  // namespace
}  // namespace ddprun::agent
