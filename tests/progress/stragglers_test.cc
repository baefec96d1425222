// Stragglers judged from the ranks' busy times (progress/stragglers.h): who is named, by what
// median, and how they are printed.
#include "progress/stragglers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ddprun::progress {
namespace {

RankProgressEntry busy_rank(uint32_t rank, uint32_t local_rank, uint64_t busy_us) {
  RankProgressEntry e;
  e.rank = rank;
  e.local_rank = local_rank;
  e.step = 10;
  e.busy_us = busy_us;
  return e;
}

std::vector<uint32_t> named(const StragglerFinding& f) {
  std::vector<uint32_t> ranks;
  for (const StragglerEntry& s : f.stragglers) ranks.push_back(s.rank);
  return ranks;
}

TEST(Stragglers, ARankOverTheThresholdTimesTheMedianIsNamedAcrossNodes) {
  const std::vector<RankProgressEntry> a{busy_rank(0, 0, 50'000), busy_rank(1, 1, 52'000)};
  const std::vector<RankProgressEntry> b{busy_rank(2, 0, 49'000), busy_rank(3, 1, 210'000)};
  const std::vector<NodeRanks> nodes{{"10.0.0.2", b}, {"10.0.0.1", a}};
  const StragglerFinding f = find_stragglers(nodes, 1500);
  EXPECT_EQ(f.threshold_milli, 1500u);
  EXPECT_EQ(f.ranks_measured, 4u);
  EXPECT_EQ(f.median_us, 50'000u);  // the lower median of 49, 50, 52, 210 ms
  ASSERT_EQ(named(f), std::vector<uint32_t>{3});
  EXPECT_EQ(f.stragglers[0].node, "10.0.0.2");
  EXPECT_EQ(f.stragglers[0].local_rank, 1u);
  EXPECT_EQ(f.stragglers[0].busy_us, 210'000u);
}

// Issue 34: two nodes asking a moment apart were told different medians for the same straggler
// (51 vs 43 ms). The finding told is the job's: the same figures while the same ranks are named
// over as many measured ranks; a new one once that changes.
TEST(Stragglers, EveryNodeIsToldThePublishedFindingUntilTheRanksNamedChange) {
  const std::vector<RankProgressEntry> first{busy_rank(0, 0, 51'000), busy_rank(1, 1, 250'000)};
  const std::vector<RankProgressEntry> later{busy_rank(0, 0, 43'000), busy_rank(1, 1, 240'000)};
  const std::vector<RankProgressEntry> healed{busy_rank(0, 0, 43'000), busy_rank(1, 1, 45'000)};
  StragglerFinding published;
  const NodeRanks a{"a", first};
  const StragglerFinding told_a = publish_stragglers(published, find_stragglers({&a, 1}, 1500));
  const NodeRanks b{"a", later};
  const StragglerFinding told_b = publish_stragglers(published, find_stragglers({&b, 1}, 1500));
  EXPECT_EQ(told_a, told_b);
  EXPECT_EQ(told_b.median_us, 51'000u);
  // More ranks measured, the same one named: still the published figures (a node that asked
  // first, when only its own ranks were measured, and one that asks later say the same).
  const std::vector<RankProgressEntry> more{busy_rank(2, 0, 40'000), busy_rank(3, 1, 41'000)};
  const std::vector<NodeRanks> both{{"a", later}, {"b", more}};
  const StragglerFinding told_d = publish_stragglers(published, find_stragglers(both, 1500));
  EXPECT_EQ(told_d, told_a);
  const NodeRanks c{"a", healed};
  const StragglerFinding told_c = publish_stragglers(published, find_stragglers({&c, 1}, 1500));
  EXPECT_TRUE(told_c.stragglers.empty());
  EXPECT_EQ(told_c.median_us, 43'000u);
  EXPECT_EQ(published, told_c);
}

TEST(Stragglers, RanksWithinTheThresholdAreNotNamed) {
  // 74 ms is under 1.5 × 50 ms; exactly 75 ms is not over it either.
  const std::vector<RankProgressEntry> ranks{busy_rank(0, 0, 50'000), busy_rank(1, 1, 74'000),
                                             busy_rank(2, 2, 75'000), busy_rank(3, 3, 40'000)};
  const std::vector<NodeRanks> nodes{{"a", ranks}};
  const StragglerFinding f = find_stragglers(nodes, 1500);
  EXPECT_EQ(f.median_us, 50'000u);
  EXPECT_TRUE(f.stragglers.empty());
  EXPECT_EQ(named(find_stragglers(nodes, 1400)), (std::vector<uint32_t>{1, 2}));
}

TEST(Stragglers, SeveralStragglersComeByRank) {
  const std::vector<RankProgressEntry> ranks{busy_rank(5, 1, 300'000), busy_rank(0, 0, 10'000),
                                             busy_rank(2, 0, 11'000), busy_rank(1, 1, 250'000),
                                             busy_rank(4, 0, 10'000)};
  const std::vector<NodeRanks> nodes{{"a", ranks}};
  EXPECT_EQ(named(find_stragglers(nodes, 2000)), (std::vector<uint32_t>{1, 5}));
}

TEST(Stragglers, RanksWithoutABusyTimeAreNotMeasured) {
  const std::vector<RankProgressEntry> ranks{busy_rank(0, 0, 0), busy_rank(1, 1, 0),
                                             busy_rank(2, 2, 100'000), busy_rank(3, 3, 20'000)};
  const std::vector<NodeRanks> nodes{{"a", ranks}};
  const StragglerFinding f = find_stragglers(nodes, 1500);
  EXPECT_EQ(f.ranks_measured, 2u);
  EXPECT_EQ(f.median_us, 20'000u);  // the faster of two: the slower one is judged against it
  EXPECT_EQ(named(f), std::vector<uint32_t>{2});
}

TEST(Stragglers, FewerThanTwoMeasuredRanksOrNoThresholdNameNobody) {
  const std::vector<RankProgressEntry> one{busy_rank(0, 0, 900'000), busy_rank(1, 1, 0)};
  const std::vector<NodeRanks> nodes{{"a", one}};
  const StragglerFinding f = find_stragglers(nodes, 1500);
  EXPECT_EQ(f.ranks_measured, 1u);
  EXPECT_EQ(f.median_us, 900'000u);
  EXPECT_TRUE(f.stragglers.empty());
  EXPECT_EQ(find_stragglers({}, 1500), (StragglerFinding{1500, 0, 0, {}}));
  const std::vector<RankProgressEntry> two{busy_rank(0, 0, 1'000), busy_rank(1, 1, 900'000)};
  const std::vector<NodeRanks> judged{{"a", two}};
  EXPECT_EQ(find_stragglers(judged, 0), StragglerFinding{});
}

TEST(Stragglers, HugeBusyTimesFromAPeerDoNotOverflow) {
  const std::vector<RankProgressEntry> ranks{busy_rank(0, 0, UINT64_MAX),
                                             busy_rank(1, 1, UINT64_MAX - 1),
                                             busy_rank(2, 2, UINT64_MAX / 2)};
  const std::vector<NodeRanks> nodes{{"a", ranks}};
  const StragglerFinding f = find_stragglers(nodes, 1'000'000);
  EXPECT_EQ(f.median_us, UINT64_MAX - 1);
  EXPECT_TRUE(f.stragglers.empty());
}

TEST(Stragglers, TheThresholdIsARatioAboveOne) {
  EXPECT_EQ(straggler_threshold_milli(1.5).value(), 1500u);
  EXPECT_EQ(straggler_threshold_milli(1.001).value(), 1001u);
  EXPECT_EQ(straggler_threshold_milli(1000).value(), 1'000'000u);
  for (double bad : {1.0, 0.5, 0.0, -2.0, 1000.5, std::nan(""), HUGE_VAL}) {
    auto r = straggler_threshold_milli(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error_message().find("above 1 and at most 1000"), std::string::npos)
        << r.error_message();
  }
}

TEST(Stragglers, AStragglerIsPrintedWithItsBusyTimeAndTheMedian) {
  const StragglerFinding f{1500, 4, 200'000, {{3, 1, "127.0.0.2", 420'000}}};
  EXPECT_EQ(format_straggler(f.stragglers[0], f),
            "rank 3 (node 127.0.0.2, local_rank 1): busy 420 ms per step, 2.1x the job's median "
            "of 200 ms");
  EXPECT_EQ(format_busy(1'500), "1.5 ms");
  EXPECT_EQ(format_busy(2'340'000), "2.34 s");
  EXPECT_EQ(format_busy(75'000'000), "75.0 s");
}

}  // namespace
}  // namespace ddprun::progress
