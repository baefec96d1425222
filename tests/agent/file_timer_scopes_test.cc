// The file timer's bookkeeping on a fake clock: deadlines from wall-clock expirations, release,
// torch's expiry rules, and the registered-workers-only guard.
#include "agent/file_timer/file_timer_scopes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>

namespace ddprun::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class FileTimerScopesTest : public ::testing::Test {
 protected:
  // A request expiring `in` from the fake clock's wall time.
  FileTimerRequest acquire(pid_t pid, std::string scope, std::chrono::duration<double> in,
                           int signal = SIGKILL) {
    const double wall = std::chrono::duration<double>(clock.wall_now().time_since_epoch()).count();
    return FileTimerRequest{pid, std::move(scope), wall + in.count(), signal};
  }
  FileTimerRequest release(pid_t pid, std::string scope) {
    return FileTimerRequest{pid, std::move(scope), -1, 0};
  }
  Status apply(const FileTimerRequest& r) {
    return scopes.apply(r, clock.steady_now(), clock.wall_now());
  }

  FakeClock clock;
  FileTimerScopes scopes{8};
};

TEST_F(FileTimerScopesTest, DeadlineIsTheWallExpirationOnTheMonotonicClock) {
  scopes.add_worker(100, 0);
  ASSERT_TRUE(apply(acquire(100, "a", milliseconds(2500))).ok());
  EXPECT_EQ(scopes.next_deadline(), clock.steady_now() + milliseconds(2500));
  clock.advance(milliseconds(2499));
  EXPECT_TRUE(scopes.take_expired(clock.steady_now()).empty());
  clock.advance(milliseconds(1));
  EXPECT_EQ(scopes.take_expired(clock.steady_now()).size(), 1u);
  EXPECT_EQ(scopes.next_deadline(), std::nullopt);
}

TEST_F(FileTimerScopesTest, ExpirationAlreadyPastIsDueAtOnce) {
  scopes.add_worker(100, 0);
  ASSERT_TRUE(apply(acquire(100, "a", seconds(-30))).ok());
  EXPECT_EQ(scopes.next_deadline(), clock.steady_now());
}

TEST_F(FileTimerScopesTest, FarFutureExpirationDoesNotOverflow) {
  scopes.add_worker(100, 0);
  ASSERT_TRUE(apply(FileTimerRequest{100, "a", 1e300, SIGKILL}).ok());
  ASSERT_TRUE(scopes.next_deadline().has_value());
  EXPECT_GT(*scopes.next_deadline(), clock.steady_now() + std::chrono::hours(24 * 365 * 30));
}

TEST_F(FileTimerScopesTest, ReleaseCancelsAndUnknownReleaseIsHarmless) {
  scopes.add_worker(100, 0);
  ASSERT_TRUE(apply(acquire(100, "a", seconds(1))).ok());
  ASSERT_TRUE(apply(release(100, "b")).ok());  // not held: nothing happens
  EXPECT_EQ(scopes.scope_count(), 1u);
  ASSERT_TRUE(apply(release(100, "a")).ok());
  EXPECT_EQ(scopes.scope_count(), 0u);
  clock.advance(seconds(5));
  EXPECT_TRUE(scopes.take_expired(clock.steady_now()).empty());
}

TEST_F(FileTimerScopesTest, AcquiringAgainReplacesTheScope) {
  scopes.add_worker(100, 0);
  ASSERT_TRUE(apply(acquire(100, "a", seconds(1))).ok());
  ASSERT_TRUE(apply(acquire(100, "a", seconds(10), SIGTERM)).ok());
  EXPECT_EQ(scopes.scope_count(), 1u);
  clock.advance(seconds(5));
  EXPECT_TRUE(scopes.take_expired(clock.steady_now()).empty());
  clock.advance(seconds(5));
  auto expired = scopes.take_expired(clock.steady_now());
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].signal, SIGTERM);
}

TEST_F(FileTimerScopesTest, SameScopeIdOfTwoWorkersIsTwoTimers) {
  scopes.add_worker(100, 0);
  scopes.add_worker(101, 1);
  ASSERT_TRUE(apply(acquire(100, "step", seconds(1))).ok());
  ASSERT_TRUE(apply(acquire(101, "step", seconds(2))).ok());
  ASSERT_TRUE(apply(release(100, "step")).ok());
  clock.advance(seconds(2));
  auto expired = scopes.take_expired(clock.steady_now());
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].pid, 101);
  EXPECT_EQ(expired[0].local_rank, 1);
}

TEST_F(FileTimerScopesTest, StrayPidIsRefusedAndNeverTracked) {
  scopes.add_worker(100, 0);
  Status s = apply(acquire(555, "a", seconds(-1)));
  EXPECT_TRUE(s.is_refused());
  EXPECT_NE(s.message().find("pid 555, which is not a worker of this node"), std::string::npos);
  EXPECT_EQ(scopes.scope_count(), 0u);
  EXPECT_TRUE(scopes.take_expired(clock.steady_now()).empty());
}

TEST_F(FileTimerScopesTest, EarliestExpiredScopeNamingASignalDecides) {
  scopes.add_worker(100, 3);
  ASSERT_TRUE(apply(acquire(100, "c", seconds(3), SIGKILL)).ok());
  ASSERT_TRUE(apply(acquire(100, "a", seconds(1), 0)).ok());
  ASSERT_TRUE(apply(acquire(100, "b", seconds(2), SIGTERM)).ok());
  clock.advance(seconds(3));
  auto expired = scopes.take_expired(clock.steady_now());
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].pid, 100);
  EXPECT_EQ(expired[0].local_rank, 3);
  EXPECT_EQ(expired[0].scope_id, "b");
  EXPECT_EQ(expired[0].signal, SIGTERM);
  EXPECT_EQ(expired[0].expired_scopes, (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(FileTimerScopesTest, ScopesNamingNoSignalExpireWithoutAKill) {
  scopes.add_worker(100, 0);
  ASSERT_TRUE(apply(acquire(100, "a", seconds(1), 0)).ok());
  ASSERT_TRUE(apply(acquire(100, "b", seconds(1), -9)).ok());
  clock.advance(seconds(1));
  auto expired = scopes.take_expired(clock.steady_now());
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].signal, 0);
  EXPECT_EQ(expired[0].scope_id, "a");
  EXPECT_EQ(scopes.scope_count(), 0u);
}

TEST_F(FileTimerScopesTest, ExpiryDropsEveryScopeOfThatWorkerOnly) {
  scopes.add_worker(100, 0);
  scopes.add_worker(101, 1);
  ASSERT_TRUE(apply(acquire(100, "a", seconds(1))).ok());
  ASSERT_TRUE(apply(acquire(100, "later", seconds(60))).ok());
  ASSERT_TRUE(apply(acquire(101, "b", seconds(60))).ok());
  clock.advance(seconds(1));
  auto expired = scopes.take_expired(clock.steady_now());
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].expired_scopes, (std::vector<std::string>{"a"}));
  EXPECT_EQ(scopes.scope_count(), 1u);  // 100's "later" went with it; 101's stays
  EXPECT_EQ(scopes.next_deadline(), clock.steady_now() + seconds(59));
}

TEST_F(FileTimerScopesTest, WorkersExpiringTogetherGetOneDecisionEach) {
  for (pid_t pid : {300, 100, 200}) scopes.add_worker(pid, pid / 100);
  for (pid_t pid : {300, 100, 200}) ASSERT_TRUE(apply(acquire(pid, "s", seconds(1))).ok());
  clock.advance(seconds(2));
  auto expired = scopes.take_expired(clock.steady_now());
  ASSERT_EQ(expired.size(), 3u);
  EXPECT_EQ(expired[0].pid, 100);
  EXPECT_EQ(expired[1].pid, 200);
  EXPECT_EQ(expired[2].pid, 300);
}

TEST_F(FileTimerScopesTest, RemovedWorkerLosesItsScopesAndIsRefusedAfter) {
  scopes.add_worker(100, 0);
  ASSERT_TRUE(apply(acquire(100, "a", seconds(1))).ok());
  scopes.remove_worker(100);  // reaped: the pid may be reused and must never be signalled
  EXPECT_EQ(scopes.scope_count(), 0u);
  EXPECT_EQ(scopes.next_deadline(), std::nullopt);
  EXPECT_TRUE(apply(acquire(100, "a", seconds(-1))).is_refused());
  clock.advance(seconds(2));
  EXPECT_TRUE(scopes.take_expired(clock.steady_now()).empty());
}

TEST_F(FileTimerScopesTest, ScopeLimitRefusesNewScopesButNotReplacements) {
  FileTimerScopes small(2);
  small.add_worker(100, 0);
  auto now = clock.steady_now();
  auto wall = clock.wall_now();
  ASSERT_TRUE(small.apply(acquire(100, "a", seconds(1)), now, wall).ok());
  ASSERT_TRUE(small.apply(acquire(100, "b", seconds(1)), now, wall).ok());
  Status s = small.apply(acquire(100, "c", seconds(1)), now, wall);
  EXPECT_TRUE(s.is_refused());
  EXPECT_NE(s.message().find("2 scopes are already held"), std::string::npos);
  EXPECT_TRUE(small.apply(acquire(100, "a", seconds(5)), now, wall).ok());
  EXPECT_TRUE(small.apply(release(100, "a"), now, wall).ok());
  EXPECT_TRUE(small.apply(acquire(100, "c", seconds(1)), now, wall).ok());
}

}  // namespace
}  // namespace ddprun::agent
