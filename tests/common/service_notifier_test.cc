// The service notifier's messages, the watchdog timer and the periodic status line, on a real
// io_context with a recording notifier (no service manager needed).
#include <gtest/gtest.h>

#include <chrono>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "common/periodic_status.h"
#include "common/service_watchdog.h"
#include "tests/common/recording_notifier.h"
#include "tests/support/run_until.h"

namespace ddprun {
namespace {

using namespace std::chrono_literals;
using testing::RecordingNotifier;

TEST(ServiceNotifier, StatusIsOneSafeLine) {
  EXPECT_EQ(ServiceNotifier::status_message("job a: running"), "STATUS=job a: running");
  // A newline would start a second assignment (e.g. a forged READY=1).
  EXPECT_EQ(ServiceNotifier::status_message("x\nREADY=1\r\t"), "STATUS=x READY=1  ");
  const std::string long_line(2000, 'a');
  EXPECT_EQ(ServiceNotifier::status_message(long_line).size(),
            std::string("STATUS=").size() + ServiceNotifier::kMaxStatusBytes);
  EXPECT_EQ(ServiceNotifier::ready_message(""), "READY=1");
  EXPECT_EQ(ServiceNotifier::ready_message("up"), "READY=1\nSTATUS=up");
}

TEST(ServiceNotifier, NullNotifierIsInactiveAndHasNoWatchdog) {
  NullServiceNotifier null;
  EXPECT_FALSE(null.active());
  EXPECT_FALSE(null.watchdog_timeout());
  null.ready("x");  // goes nowhere, does not crash
}

using ddprun::testing::run_until;  // tests/support

TEST(ServiceWatchdog, PingsFromTheLoopAtHalfTheTimeoutUntilStopped) {
  boost::asio::io_context io;
  RecordingNotifier notifier(std::chrono::microseconds(20000));
  ServiceWatchdog watchdog(io, notifier);
  ASSERT_TRUE(watchdog.interval());
  EXPECT_EQ(*watchdog.interval(), std::chrono::microseconds(10000));
  watchdog.start();
  EXPECT_EQ(notifier.pings(), 1);  // at once: the loop is alive now
  ASSERT_TRUE(run_until(io, [&] { return notifier.pings() >= 4; }));
  watchdog.stop();
  const int pings = notifier.pings();
  io.restart();
  io.run_for(50ms);  // several intervals: nothing may come after stop()
  EXPECT_EQ(notifier.pings(), pings);
}

TEST(ServiceWatchdog, AWedgedLoopSendsNoPing) {
  boost::asio::io_context io;
  RecordingNotifier notifier(std::chrono::microseconds(2000));
  ServiceWatchdog watchdog(io, notifier);
  watchdog.start();
  // The loop is busy in one handler for many intervals: the pings wait for it, as systemd's
  // watchdog must see.
  int before = -1;
  int after = -1;
  boost::asio::post(io, [&] {
    before = notifier.pings();
    const auto until = std::chrono::steady_clock::now() + 30ms;
    while (std::chrono::steady_clock::now() < until) {
    }
    after = notifier.pings();
  });
  ASSERT_TRUE(run_until(io, [&] { return after >= 0; }));
  EXPECT_EQ(after, before);  // 15 intervals went by without a ping
  // Once the loop is free again, the pings resume.
  ASSERT_TRUE(run_until(io, [&] { return notifier.pings() > after; }));
}

TEST(ServiceWatchdog, WithoutAWatchdogNothingIsSent) {
  boost::asio::io_context io;
  RecordingNotifier notifier;  // no WATCHDOG_USEC
  ServiceWatchdog watchdog(io, notifier);
  watchdog.start();
  EXPECT_FALSE(watchdog.running());
  io.run_for(10ms);
  EXPECT_TRUE(notifier.messages.empty());
}

TEST(PeriodicStatus, SendsTheLineOnlyWhenItChanges) {
  boost::asio::io_context io;
  RecordingNotifier notifier;
  int jobs = 0;
  int asked = 0;
  PeriodicStatus status(io, notifier, 1ms, [&] {
    ++asked;
    return "jobs " + std::to_string(jobs);
  });
  status.start(/*with_ready=*/true);
  ASSERT_EQ(notifier.messages, std::vector<std::string>{"READY=1\nSTATUS=jobs 0"});
  ASSERT_TRUE(run_until(io, [&] { return asked >= 5; }));
  EXPECT_EQ(notifier.messages.size(), 1u);  // unchanged: nothing more
  jobs = 2;
  ASSERT_TRUE(run_until(io, [&] { return notifier.messages.size() == 2; }));
  EXPECT_EQ(notifier.messages.back(), "STATUS=jobs 2");
  status.stop();
  jobs = 3;
  io.restart();
  io.run_for(10ms);
  EXPECT_EQ(notifier.messages.size(), 2u);
}

}  // namespace
}  // namespace ddprun
