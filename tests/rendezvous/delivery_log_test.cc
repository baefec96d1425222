// DeliveryLog: pushes numbered per membership and kept until acknowledged, replayed exactly on
// a resume; answers kept by request id; bounded; and a log restored after a server restart.
#include "rendezvous/server/delivery_log.h"

#include <gtest/gtest.h>

namespace ddprun::rdzv {
namespace {

Push restart(uint64_t round) {
  return RestartRequested{round, RestartReason::kMemberLost, "x", ""};
}

uint64_t round_of(const Push& p) { return std::get<RestartRequested>(p).round; }

TEST(DeliveryLogTest, AResumeGetsExactlyThePushesAfterItsCount) {
  DeliveryLog log;
  for (uint64_t r = 1; r <= 5; ++r) log.record(restart(r));
  EXPECT_EQ(log.sent(), 5u);
  ASSERT_TRUE(log.acknowledge(2).ok());
  EXPECT_EQ(log.unacknowledged(), 3u);
  // Written to a connection that was then cut: 3 and 4 arrived, 5 did not.
  auto missed = log.resume(4);
  ASSERT_TRUE(missed.ok()) << missed.error_message();
  ASSERT_EQ(missed->size(), 1u);
  EXPECT_EQ(round_of(missed->front()), 5u);
  EXPECT_EQ(log.unacknowledged(), 1u);  // 5 stays until acknowledged
  auto nothing = log.resume(5);
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->empty());
}

TEST(DeliveryLogTest, AckingOrResumingMoreThanWasSentIsRefusedWithBothCounts) {
  DeliveryLog log;
  log.record(restart(1));
  Status bad = log.acknowledge(2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("acknowledges 2 pushes; only 1 were sent"), std::string::npos)
      << bad.message();
  auto refused = log.resume(7);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error_message().find("received 7 pushes; this server sent it 1"),
            std::string::npos)
      << refused.error_message();
}

TEST(DeliveryLogTest, ANodeTooFarBehindCannotResumeButAcknowledgedOnesStillCan) {
  DeliveryLog log;
  for (uint64_t r = 1; r <= DeliveryLog::kMaxUnacknowledged + 3; ++r) log.record(restart(r));
  EXPECT_EQ(log.unacknowledged(), DeliveryLog::kMaxUnacknowledged);
  auto refused = log.resume(0);  // pushes 1-3 are forgotten
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error_message().find("keeps at most"), std::string::npos);
  auto ok = log.resume(3);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(ok->size(), DeliveryLog::kMaxUnacknowledged);
  EXPECT_EQ(round_of(ok->front()), 4u);
}

TEST(DeliveryLogTest, ARestoredLogBelievesTheFirstResumeAndReplaysWhatCameSince) {
  DeliveryLog log = DeliveryLog::restored();
  log.record(restart(8));  // pushed after the restart, while the node was away
  auto missed = log.resume(41);
  ASSERT_TRUE(missed.ok()) << missed.error_message();
  ASSERT_EQ(missed->size(), 1u);
  EXPECT_EQ(round_of(missed->front()), 8u);
  EXPECT_EQ(log.sent(), 42u);  // numbering continues from the node's count
  EXPECT_TRUE(log.acknowledge(42).ok());
  EXPECT_FALSE(log.acknowledge(43).ok());
}

TEST(DeliveryLogTest, AnswersAreKeptByRequestIdForTheLatestRequestsOnly) {
  DeliveryLog log;
  for (uint32_t id = 100; id < 100 + DeliveryLog::kMaxReplies + 1; ++id) {
    Reply r;
    r.request_id = id;
    r.integer = id * 2;
    log.remember(r);
  }
  EXPECT_EQ(log.answered(100), nullptr);  // the oldest went
  ASSERT_NE(log.answered(101), nullptr);
  EXPECT_EQ(log.answered(101)->integer, 202);
  EXPECT_EQ(log.answered(7), nullptr);
}

}  // namespace
}  // namespace ddprun::rdzv
