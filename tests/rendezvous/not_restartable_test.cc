// Failures that must not be restarted (issue 36, protocol v7): ReportFailure's not_restartable
// and JobFailed's kNotRestartable on the wire, and the round state failing the job at once
// with them, restarts left or not. Pure: byte strings and a fake clock.
#include <gtest/gtest.h>

#include "rendezvous/server/job_snapshot.h"
#include "rendezvous/server/round_state.h"
#include "rendezvous/wire/codec.h"

namespace ddprun::rdzv {
namespace {

using std::chrono::milliseconds;

TEST(NotRestartableCodec, TheReasonTravelsInReportFailureAndJobFailed) {
  CodecLimits limits;
  const ReportFailureMsg report{4, 2, "{}", 79, "rank 3 asked to stop the job: NaN loss"};
  auto decoded = decode_client_frame(encode_frame(ClientMessage(report)), limits);
  ASSERT_TRUE(decoded.ok()) << decoded.error_message();
  EXPECT_EQ(std::get<ReportFailureMsg>(*decoded).not_restartable, report.not_restartable);
  EXPECT_EQ(std::get<ReportFailureMsg>(*decoded).exit_code, 79);

  const JobFailed failed{JobFailureReason::kNotRestartable, "stop", "{}", 79};
  auto told = decode_server_frame(encode_frame(ServerMessage(failed)), limits);
  ASSERT_TRUE(told.ok()) << told.error_message();
  EXPECT_EQ(std::get<JobFailed>(*told).reason, JobFailureReason::kNotRestartable);
  EXPECT_STREQ(to_string(JobFailureReason::kNotRestartable), "not_restartable");
}

TEST(NotRestartableCodec, BoundedAndTruncationsAndUnknownReasonsAreMalformed) {
  CodecLimits limits;
  limits.max_string_bytes = 64;
  const ReportFailureMsg long_reason{4, 2, "{}", 79, std::string(65, 'r')};
  EXPECT_FALSE(decode_client_frame(encode_frame(ClientMessage(long_reason)), limits).ok());
  const std::string frame = encode_frame(ClientMessage(ReportFailureMsg{4, 2, "{}", 79, "why"}));
  // A v6 report (no reason) is cut short: refused, not read as an empty reason.
  EXPECT_FALSE(decode_client_frame(frame.substr(0, frame.size() - 4 - 3), limits).ok());
  std::string reason5 =
      encode_frame(ServerMessage(JobFailed{JobFailureReason::kNotRestartable, "m", "", 79}));
  const std::size_t at = reason5.find(static_cast<char>(4), 4);  // the reason byte after type
  ASSERT_NE(at, std::string::npos);
  reason5[at] = 5;
  EXPECT_FALSE(decode_server_frame(reason5, limits).ok());
}

class NotRestartableRoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.min_nodes = 2;
    options_.max_nodes = 2;
    options_.max_restarts = 10;
    state_.emplace("job", options_, clock_.steady_now());
    for (const char* id : {"a", "b"}) {
      ASSERT_TRUE(state_
                      ->join(NodeInfo{id, 2, {}, std::string("addr-") + id, 1000}, options_,
                             clock_.steady_now())
                      .ok());
    }
    ASSERT_EQ(state_->phase(), RoundState::Phase::kRunning);
  }

  FakeClock clock_;
  JobOptions options_;
  std::optional<RoundState> state_;
};

TEST_F(NotRestartableRoundTest, FailsTheJobAtOnceWithRestartsLeftTellingEveryNode) {
  auto d = state_->report_failure("b", 0, "{\"report\":1}", 79, clock_.steady_now(),
                                  "3 attempts in a row failed at step 1234: not restarting");
  ASSERT_TRUE(d.ok()) << d.error_message();
  ASSERT_EQ(d->size(), 2u);
  for (const Outgoing& o : *d) {
    const auto* failed = std::get_if<JobFailed>(&o.push);
    ASSERT_NE(failed, nullptr) << o.node_id;
    EXPECT_EQ(failed->reason, JobFailureReason::kNotRestartable);
    EXPECT_EQ(failed->exit_code, 79);
    EXPECT_EQ(failed->failure_report, "{\"report\":1}");
    EXPECT_NE(failed->message.find("3 attempts in a row failed at step 1234"), std::string::npos)
        << failed->message;
  }
  EXPECT_EQ(state_->phase(), RoundState::Phase::kFailed);
  EXPECT_EQ(state_->restart_count(), 0u);  // no restart consumed
  // A node that asks later hears the same.
  auto told = state_->catch_up("a");
  ASSERT_TRUE(told.has_value());
  EXPECT_EQ(std::get<JobFailed>(*told).reason, JobFailureReason::kNotRestartable);
}

// The outcome is durable (job_snapshot.h): a restarted daemon tells a late node the same.
TEST_F(NotRestartableRoundTest, TheReasonSurvivesTheJobsSnapshot) {
  ASSERT_TRUE(state_->report_failure("a", 0, "{}", 79, clock_.steady_now(), "stop").ok());
  const state::StoredJob stored = encode_job_snapshot(*state_, {{"a", 11}, {"b", 22}});
  auto snap = decode_job_snapshot("job", stored, clock_.steady_now());
  ASSERT_TRUE(snap.ok()) << snap.error_message();
  auto told = snap->round->catch_up("b");
  ASSERT_TRUE(told && std::holds_alternative<JobFailed>(*told));
  EXPECT_EQ(std::get<JobFailed>(*told).reason, JobFailureReason::kNotRestartable);
  EXPECT_EQ(std::get<JobFailed>(*told).exit_code, 79);
}

TEST_F(NotRestartableRoundTest, AnOrdinaryFailureStillRestarts) {
  auto d = state_->report_failure("b", 0, "{}", 1, clock_.steady_now());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(state_->restart_count(), 1u);
  EXPECT_EQ(state_->phase(), RoundState::Phase::kGathering);
}

}  // namespace
}  // namespace ddprun::rdzv
