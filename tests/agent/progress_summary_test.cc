// The progress phrase of the service status line: bounded for any number of ranks, readable,
// and stable while nothing meaningful changes.
#include "agent/progress/progress_summary.h"

#include <gtest/gtest.h>

namespace ddprun::agent {
namespace {

RankProgress beat(int rank, std::optional<std::int64_t> step, int age_ms) {
  RankProgress p;
  p.rank = rank;
  p.last_step = step;
  p.heartbeat_age = Millis(age_ms);
  p.heartbeat_seen = true;
  return p;
}

RankProgress silent(int rank, int age_ms) {
  RankProgress p = beat(rank, std::nullopt, age_ms);
  p.heartbeat_seen = false;
  return p;
}

TEST(ProgressSummary, StepRangeAndTheOldestHeartbeatWithItsRank) {
  const auto s = summarize_progress(
      {beat(0, 1236, 300), beat(1, 1235, 900), beat(3, 1234, 2150), beat(2, 1236, 40)});
  EXPECT_EQ(s.ranks, 4);
  EXPECT_EQ(s.min_step, 1234);
  EXPECT_EQ(s.max_step, 1236);
  EXPECT_EQ(s.oldest_rank, 3);
  EXPECT_EQ(describe(s), "steps 1234-1236, oldest heartbeat 2.1 s (rank 3)");
}

TEST(ProgressSummary, FreshHeartbeatsNameNoRankAndOneStepIsNotARange) {
  EXPECT_EQ(describe(summarize_progress({beat(4, 7, 999), beat(5, 7, 10)})),
            "step 7, oldest heartbeat < 1 s");
  // Which rank happened to beat last does not change the line.
  EXPECT_EQ(describe(summarize_progress({beat(4, 7, 10), beat(5, 7, 999)})),
            "step 7, oldest heartbeat < 1 s");
}

TEST(ProgressSummary, AgesAreNeverRoundedUpAndLongOnesInWholeSeconds) {
  EXPECT_EQ(describe(summarize_progress({beat(0, 1, 1999)})),
            "step 1, oldest heartbeat 1.9 s (rank 0)");
  EXPECT_EQ(describe(summarize_progress({beat(0, 1, 59'999)})),
            "step 1, oldest heartbeat 59.9 s (rank 0)");
  EXPECT_EQ(describe(summarize_progress({beat(0, 1, 305'400)})),
            "step 1, oldest heartbeat 305 s (rank 0)");
}

TEST(ProgressSummary, TiesGoToTheLowestRank) {
  EXPECT_EQ(summarize_progress({beat(6, 1, 3000), beat(2, 1, 3000), beat(9, 1, 3000)}).oldest_rank,
            2);
}

TEST(ProgressSummary, RanksWithoutHeartbeatsOrStepsAreCountedNotListed) {
  EXPECT_EQ(describe(summarize_progress({silent(0, 5000), silent(1, 5000)})),
            "no heartbeat yet (2 ranks)");
  EXPECT_EQ(describe(summarize_progress({silent(0, 9000), beat(1, 12, 4000), silent(2, 9000)})),
            "step 12, oldest heartbeat 4.0 s (rank 1); 2 ranks without a heartbeat yet");
  // Heartbeats without a step (a touched file): no step phrase.
  EXPECT_EQ(describe(summarize_progress({beat(0, std::nullopt, 1500)})),
            "oldest heartbeat 1.5 s (rank 0)");
  EXPECT_EQ(describe(summarize_progress({})), "");
}

TEST(ProgressSummary, ManyRanksStillMakeOneShortLine) {
  std::vector<RankProgress> ranks;
  for (int r = 0; r < 4096; ++r) ranks.push_back(beat(r, 100000 + r % 3, 100 + r % 700));
  ranks[2500] = beat(2500, 99998, 12'345);
  const std::string line = describe(summarize_progress(ranks));
  EXPECT_EQ(line, "steps 99998-100002, oldest heartbeat 12.3 s (rank 2500)");
}

}  // namespace
}  // namespace ddprun::agent
