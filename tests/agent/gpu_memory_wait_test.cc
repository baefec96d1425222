// Issue 38: before a restart the agent waits until the last attempt's processes no longer hold
// GPU memory. The real wait (NvmlGpuMemoryWait) on the fake NVML (fake_nvml.cc), whose process
// list drops an entry after some answers, and a timer on a fake clock: no real time passes.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/health/gpu_memory_wait.h"
#include "tests/agent/fake_agent_parts.h"
#include "tests/support/temp_dir.h"

namespace ddprun::agent {
namespace {

using testing::FakeClockTimer;
using ::testing::HasSubstr;

class GpuMemoryWaitTest : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("DDPRUN_FAKE_NVML_CONFIG", (dir_ / "nvml").c_str(), 1); }
  void TearDown() override { ::unsetenv("DDPRUN_FAKE_NVML_CONFIG"); }
  void nvml(const std::string& config) { std::ofstream(dir_ / "nvml") << config; }
  // Starts a wait for `pids`; the outcome lands in done_.
  void wait(std::vector<pid_t> pids, GpuMemoryWaitOptions options = {}) {
    if (options.nvml_library == builtin::kNvmlDefaultLibrary)
      options.nvml_library = DDPRUN_FAKE_NVML;
    wait_.emplace(timer_, clock_, options);
    wait_->wait(std::move(pids), [this](Status s) { done_ = std::move(s); });
  }
  // Moves the fake clock on by one poll, firing the timer if due; false once it is not armed.
  bool tick(Millis by = Millis(250)) {
    if (!timer_.armed()) return false;
    clock_.advance(by);
    timer_.fire_if_due();
    return true;
  }

  ddprun::testing::TempDir dir_;
  FakeClock clock_;
  FakeClockTimer timer_{clock_};
  std::optional<NvmlGpuMemoryWait> wait_;
  std::optional<Status> done_;
};

TEST_F(GpuMemoryWaitTest, MemoryReleasedAfterSomePollsLetsTheRestartGoOn) {
  // Worker 4242 holds memory for the first 3 answers, then the driver has freed it.
  nvml("devices 2\nprocess 1 4242 1073741824 3\n");
  wait({4241, 4242});
  EXPECT_FALSE(done_) << "it returned while pid 4242 still held memory";
  int polls = 1;
  while (!done_ && tick()) ++polls;
  ASSERT_TRUE(done_);
  EXPECT_TRUE(done_->ok()) << done_->message();
  EXPECT_EQ(polls, 4);
}

TEST_F(GpuMemoryWaitTest, MemoryNeverReleasedEndsAtTheBoundNamingThePidAndGpu) {
  nvml("devices 2\nprocess 0 77 100\nprocess 1 4242 1073741824\n");
  GpuMemoryWaitOptions options;
  options.bound = Millis(2000);
  wait({4242}, options);
  int polls = 0;
  while (!done_ && tick()) ++polls;
  ASSERT_TRUE(done_);
  EXPECT_TRUE(done_->is_timed_out());
  EXPECT_EQ(polls, 8);  // 2 s at 250 ms
  EXPECT_THAT(done_->message(), HasSubstr("not released within 2 s (--gpu_memory_wait)"));
  EXPECT_THAT(done_->message(), HasSubstr("pid 4242 holds 1024.0 MiB on GPU 1"));
  // pid 77 is not ours (not a worker, not descended from this process): never waited for.
  EXPECT_THAT(done_->message(), ::testing::Not(HasSubstr("pid 77")));
}

TEST_F(GpuMemoryWaitTest, OtherProcessesMemoryIsNotWaitedFor) {
  nvml("devices 1\nprocess 0 1 4096\n");
  wait({4242});
  ASSERT_TRUE(done_);
  EXPECT_TRUE(done_->ok());
}

TEST_F(GpuMemoryWaitTest, NoNvmlOrNoBoundMeansNoWait) {
  nvml("devices 1\nprocess 0 4242 4096\n");
  GpuMemoryWaitOptions options;
  options.nvml_library = dir_ / "no-such-libnvidia-ml.so";
  wait({4242}, options);
  ASSERT_TRUE(done_);
  EXPECT_TRUE(done_->ok());
  done_.reset();
  options = {};
  options.bound = Millis(0);
  wait({4242}, options);
  ASSERT_TRUE(done_);
  EXPECT_TRUE(done_->ok());
}

TEST_F(GpuMemoryWaitTest, CancelledWaitNeverAnswers) {
  nvml("devices 1\nprocess 0 4242 4096\n");
  wait({4242});
  wait_->cancel();
  EXPECT_FALSE(tick());
  EXPECT_FALSE(done_);
}

TEST(DescendsFromTest, FollowsTheParentChain) {
  EXPECT_TRUE(descends_from(::getpid(), ::getppid()));
  EXPECT_FALSE(descends_from(::getppid(), ::getpid()));
  EXPECT_FALSE(descends_from(999999999, ::getpid()));
}

}  // namespace
}  // namespace ddprun::agent
