// Heartbeats: the step as text at offset 0 of DDPRUN_HEARTBEAT_FILE. Each test runs in its own
// process (ctest), which matters: the file is opened once per process.
#include "ddp/heartbeat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST(HeartbeatTest, EachCallWritesTheStepAndANewlineAtOffsetZero) {
  const ddprun::testing::TempDir temp;  // tests/support
  const fs::path dir = temp.path();
  const fs::path file = dir / "heartbeat";
  ::setenv("DDPRUN_HEARTBEAT_FILE", file.c_str(), 1);
  ddp::heartbeat(5);
  EXPECT_EQ(read_text(file), "5\n");
  ddp::heartbeat();  // no step: the last one again
  EXPECT_EQ(read_text(file), "5\n");
  ddp::heartbeat(123);
  EXPECT_EQ(read_text(file), "123\n");
  // A shorter step overwrites the start; a reader takes the text up to the first newline.
  ddp::heartbeat(7);
  const std::string text = read_text(file);
  EXPECT_EQ(text.substr(0, text.find('\n') + 1), "7\n");
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
