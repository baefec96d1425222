// The shared-memory all-reduce between forked processes: sums that span several chunks and
// are bit-identical on every rank, and a rank that dies noticed within a fraction of a second.
#include "worker_sdk/src/shm_all_reduce.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

namespace ddp::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Runs body(rank) in `world` forked children (rank 0 creates the segment first, in the
// parent, so the children can attach) and returns their exit codes; bounded by 30 s.
std::vector<int> run_ranks(int world, std::size_t slot_bytes,
                           const std::function<int(ShmAllReduce&, int)>& body) {
  const std::string name = "/ddp_shm_test_" + std::to_string(::getpid());
  std::string error;
  auto zero = ShmAllReduce::create(name, world, 0, slot_bytes, &error);
  EXPECT_NE(zero, nullptr) << error;
  if (!zero) return {};
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::string e;
      auto mine = r == 0 ? std::move(zero) : ShmAllReduce::attach(name, world, r, &e);
      ::_exit(mine ? body(*mine, r) : 90);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 30000) != 1) ::kill(pid, SIGKILL);
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  if (zero) zero->unlink_name();
  ::shm_unlink(name.c_str());
  return codes;
}

TEST(ShmAllReduceTest, SumsAcrossChunksAndRanksBitIdentically) {
  constexpr int kWorld = 3;
  constexpr std::size_t kCount = 10007;  // ~40 KB of floats through 4 KB slots: 10 chunks
  auto codes = run_ranks(kWorld, 4096, [](ShmAllReduce& shm, int rank) {
    for (int round = 0; round < 3; ++round) {  // the same segment, call after call
      std::vector<float> data(kCount);
      for (std::size_t i = 0; i < kCount; ++i) data[i] = 0.1f * (rank + 1) * float(i % 97) + round;
      auto outcome = shm.all_reduce_sum(data.data(), kCount, ShmElement::kFloat32,
                                        Clock::now() + std::chrono::seconds(20));
      if (!outcome.ok()) return 10;
      for (std::size_t i = 0; i < kCount; ++i) {
        // The owner sums in rank order: exactly this expression, on every rank.
        float expected = 0.1f * 1 * float(i % 97) + round;
        expected += 0.1f * 2 * float(i % 97) + round;
        expected += 0.1f * 3 * float(i % 97) + round;
        if (std::memcmp(&data[i], &expected, sizeof expected) != 0) return 11;
      }
    }
    std::vector<double> wide(5, rank + 0.5);
    if (!shm.all_reduce_sum(wide.data(), wide.size(), ShmElement::kFloat64,
                            Clock::now() + std::chrono::seconds(20))
             .ok()) {
      return 12;
    }
    return wide[4] == 0.5 + 1.5 + 2.5 ? 0 : 13;
  });
  EXPECT_EQ(codes, std::vector<int>(kWorld, 0));
}

TEST(ShmAllReduceTest, ARankThatDiedIsNoticedLongBeforeTheDeadline) {
  auto codes = run_ranks(2, 4096, [](ShmAllReduce& shm, int rank) {
    if (rank == 1) return 0;  // leaves without taking part
    float x = 1;
    const auto start = Clock::now();
    auto outcome =
        shm.all_reduce_sum(&x, 1, ShmElement::kFloat32, Clock::now() + std::chrono::seconds(20));
    const bool quick = Clock::now() - start < std::chrono::seconds(10);
    return outcome.code == ShmOutcome::kPeerGone && quick ? 0 : 20;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

// A set-up that fails or throws between create and unlink_name (a peer that never attached)
// must not leave a segment of megabytes in /dev/shm.
TEST(ShmAllReduceTest, TheCreatorRemovesTheNameIfSetUpEndsBeforeUnlinking) {
  const std::string name = "/ddp_shm_test_owner_" + std::to_string(::getpid());
  std::string error;
  auto zero = ShmAllReduce::create(name, 2, 0, 4096, &error);
  ASSERT_NE(zero, nullptr) << error;
  auto one = ShmAllReduce::attach(name, 2, 1, &error);
  ASSERT_NE(one, nullptr) << error;
  one.reset();  // an attached rank never removes the name
  EXPECT_NE(ShmAllReduce::attach(name, 2, 1, &error), nullptr) << error;
  zero.reset();
  EXPECT_EQ(ShmAllReduce::attach(name, 2, 1, &error), nullptr);
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
  ::shm_unlink(name.c_str());
}

TEST(ShmAllReduceTest, AMissingSegmentIsAClearError) {
  std::string error;
  EXPECT_EQ(ShmAllReduce::attach("/ddp_shm_test_missing", 2, 1, &error), nullptr);
  EXPECT_NE(error.find("shm_open /ddp_shm_test_missing"), std::string::npos) << error;
}

}  // namespace
}  // namespace ddp::detail
