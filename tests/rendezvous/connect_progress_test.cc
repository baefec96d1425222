// What a node logs while it cannot reach its rendezvous server (issue 22): a line at the first
// failed attempt, then at 5, 15, 35, 75 s and every 60 s after; never one per attempt.
#include "rendezvous/client/connect_progress.h"

#include <gtest/gtest.h>

namespace ddprun::rdzv {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const SteadyTime t0{};

TEST(ConnectProgress, SaysWhatItWaitsForAtOnceThenAtAGrowingInterval) {
  ConnectProgress progress("127.0.0.1:9", t0, t0 + seconds(600));
  auto first = progress.failed(t0 + milliseconds(2), "connect: Connection refused");
  ASSERT_TRUE(first);
  EXPECT_EQ(*first,
            "waiting for the rendezvous server at 127.0.0.1:9: connect: Connection refused; "
            "retrying for up to 600 s");
  std::vector<int> reported_at;
  for (int ms = 100; ms <= 200'000; ms += 100) {  // an attempt every 100 ms
    if (progress.failed(t0 + milliseconds(ms), "connect: Connection refused")) {
      reported_at.push_back(ms / 1000);
    }
  }
  EXPECT_EQ(reported_at, (std::vector<int>{5, 15, 35, 75, 135, 195}));
}

TEST(ConnectProgress, LaterLinesSayHowLongHowManyTheLastErrorAndTheDeadline) {
  ConnectProgress progress("head:29400", t0, t0 + seconds(60));
  (void)progress.failed(t0, "connect: Connection refused");
  (void)progress.failed(t0 + seconds(1), "connect: Connection refused");
  auto line = progress.failed(t0 + seconds(5), "handshake timed out after 10000 ms");
  ASSERT_TRUE(line);
  EXPECT_EQ(*line,
            "still waiting for the rendezvous server at head:29400 after 5 s (3 attempts); last "
            "error: handshake timed out after 10000 ms; giving up in 55 s");
}

}  // namespace
}  // namespace ddprun::rdzv
