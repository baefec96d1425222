// Heartbeats: the step as text at offset 0 of DDPRUN_HEARTBEAT_FILE. Each test runs in its own
// process (ctest), which matters: the file is opened once per process.
#include "ddp/heartbeat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "tests/support/temp_dir.h"
#include "tests/support/text_file.h"

namespace {

namespace fs = std::filesystem;

using ddprun::testing::read_text_file;

TEST(HeartbeatTest, EachCallWritesTheStepAndANewlineAtOffsetZero) {
  const ddprun::testing::TempDir temp;  // tests/support
  const fs::path dir = temp.path();
  const fs::path file = dir / "heartbeat";
  ::setenv("DDPRUN_HEARTBEAT_FILE", file.c_str(), 1);
  ddp::heartbeat(5);
  EXPECT_EQ(read_text_file(file), "5\n");
  ddp::heartbeat();  // no step: the last one again
  EXPECT_EQ(read_text_file(file), "5\n");
  ddp::heartbeat(123);
  EXPECT_EQ(read_text_file(file), "123\n");
  // A shorter step overwrites the start; a reader takes the text up to the first newline.
  ddp::heartbeat(7);
  const std::string text = read_text_file(file);
  EXPECT_EQ(text.substr(0, text.find('\n') + 1), "7\n");
}

TEST(HeartbeatTest, ABusyTimeFollowsTheStepWithSixDecimals) {
  const ddprun::testing::TempDir temp;  // tests/support
  const fs::path file = fs::path(temp.path()) / "heartbeat";
  ::setenv("DDPRUN_HEARTBEAT_FILE", file.c_str(), 1);
  ddp::heartbeat(12, 0.153);
  EXPECT_EQ(read_text_file(file), "12 0.153000\n");
  ddp::heartbeat();  // no step: the last one again, without a busy time (it was this step's)
  const std::string again = read_text_file(file);
  EXPECT_EQ(again.substr(0, again.find('\n') + 1), "12\n");
  // What the launcher could not read is left out: the step alone.
  for (double bad : {-1.0, 1e6, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    ddp::heartbeat(13, bad);
    const std::string text = read_text_file(file);
    EXPECT_EQ(text.substr(0, text.find('\n') + 1), "13\n") << bad;
  }
}

TEST(HeartbeatTest, WithoutTheVariableItIsANoOpAndTheVariableIsReadOnce) {
  const ddprun::testing::TempDir temp;  // tests/support
  const fs::path dir = temp.path();
  ::unsetenv("DDPRUN_HEARTBEAT_FILE");
  ddp::heartbeat(1);
  ddp::heartbeat();
  ::setenv("DDPRUN_HEARTBEAT_FILE", (dir / "late").c_str(), 1);
  ddp::heartbeat(2);
  EXPECT_FALSE(fs::exists(dir / "late"));
}

}  // namespace
