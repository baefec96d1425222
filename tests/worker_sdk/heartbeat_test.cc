// Heartbeats: the step as text at offset 0 of DDPRUN_HEARTBEAT_FILE. Each test runs in its own
// process (ctest), which matters: the file is opened once per process.
#include "ddp/heartbeat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

fs::path temp_dir() {
  char dir[] = "/tmp/ddp_heartbeat_XXXXXX";
  EXPECT_NE(::mkdtemp(dir), nullptr);
  return dir;
}

TEST(HeartbeatTest, EachCallWritesTheStepAndANewlineAtOffsetZero) {
  const fs::path dir = temp_dir();
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
  fs::remove_all(dir);
}

TEST(HeartbeatTest, WithoutTheVariableItIsANoOpAndTheVariableIsReadOnce) {
  const fs::path dir = temp_dir();
  ::unsetenv("DDPRUN_HEARTBEAT_FILE");
  ddp::heartbeat(1);
  ddp::heartbeat();
  ::setenv("DDPRUN_HEARTBEAT_FILE", (dir / "late").c_str(), 1);
  ddp::heartbeat(2);
  EXPECT_FALSE(fs::exists(dir / "late"));
  fs::remove_all(dir);
}

}  // namespace
