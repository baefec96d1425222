// What a node logs as straggler findings come in (agent/progress/straggler_notices.h): a rank is
// named once when it becomes a straggler, and once more when it no longer is.
#include "agent/progress/straggler_notices.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>

namespace ddprun::agent {
namespace {

// Captures what spdlog's default logger says during a test.
class LogCapture {
 public:
  LogCapture()
      : previous_(spdlog::default_logger()),
        sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    auto logger = std::make_shared<spdlog::logger>("capture", sink_);
    logger->set_pattern("%l %v");
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  // What was logged since the last take().
  std::string take() {
    std::string out = text_.str();
    text_.str({});
    return out;
  }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TEST(StragglerNotices, ARankIsNamedWhenItBecomesAStragglerAndWhenItStops) {
  LogCapture log;
  StragglerNotices notices;
  const rdzv::StragglerFinding none{1500, 4, 50'000, {}};
  EXPECT_FALSE(notices.update(none));
  EXPECT_EQ(log.take(), "");

  const rdzv::StragglerFinding slow{1500, 4, 50'000, {{3, 1, "127.0.0.2", 210'000}}};
  EXPECT_TRUE(notices.update(slow));
  EXPECT_EQ(log.take(),
            "warning straggler: rank 3 (node 127.0.0.2, local_rank 1): busy 210 ms per step, "
            "4.2x the job's median of 50 ms (threshold 1.5x, 4 ranks measured)\n");
  // Still slow (its busy time moves): nothing new to say.
  rdzv::StragglerFinding still = slow;
  still.stragglers[0].busy_us = 190'000;
  EXPECT_FALSE(notices.update(still));
  EXPECT_EQ(log.take(), "");
  EXPECT_EQ(notices.current(), still);

  EXPECT_TRUE(notices.update(none));
  EXPECT_EQ(log.take(),
            "info straggler no more: rank 3 (node 127.0.0.2, local_rank 1) is within 1.5x the "
            "job's median busy time of 50 ms\n");
}

TEST(StragglerNotices, TheSummarySaysTheLastFinding) {
  StragglerNotices notices;
  EXPECT_EQ(notices.summary(), "");  // nothing judged yet: nothing to say
  notices.update({1500, 4, 50'000, {}});
  EXPECT_EQ(notices.summary(),
            "stragglers: none over 1.5x the job's median busy time of 50 ms (4 ranks measured)");
  notices.update({2000, 8, 50'000, {{3, 1, "b", 210'000}, {5, 1, "c", 190'000}}});
  EXPECT_EQ(notices.summary(),
            "stragglers: rank 3 (node b), rank 5 (node c) over 2x the job's median busy time of "
            "50 ms (8 ranks measured)");
}

TEST(StragglerNotices, AfterAResetTheSameRankIsNamedAgain) {
  LogCapture log;
  StragglerNotices notices;
  const rdzv::StragglerFinding slow{1500, 2, 50'000, {{1, 1, "a", 210'000}}};
  EXPECT_TRUE(notices.update(slow));
  notices.reset();
  EXPECT_EQ(notices.current(), rdzv::StragglerFinding{});
  log.take();
  EXPECT_TRUE(notices.update(slow));
  EXPECT_NE(log.take().find("straggler: rank 1"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::agent
