// torchrun's error-file JSON, written by the async-signal-safe writer, read by a JSON parser.
#include "worker_sdk/src/error_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

namespace ddp::detail {
namespace {

TEST(ErrorFileTest, MessageAndCallstackSurviveEscapingAndParseAsTorchrunsFormat) {
  const ddprun::testing::TempDir temp;  // tests/support
  const std::filesystem::path dir = temp.path();
  const std::string path = (dir / "error.json").string();
  const std::string message = "ddp::Error: \"quoted\" back\\slash\ttab \x01 caf\xc3\xa9";
  const std::string stack = "Native backtrace:\n  #0 0x1 f()\n  #1 0x2 g()\n";
  ASSERT_TRUE(write_error_file(path.c_str(), message.c_str(), stack.c_str(), 1234567890));
  ASSERT_TRUE(write_error_file(path.c_str(), message.c_str(), stack.c_str(), 1234567891));
  auto doc = nlohmann::json::parse(std::ifstream(path));  // replaced, not appended
  EXPECT_EQ(doc["message"]["message"], message);
  EXPECT_EQ(doc["message"]["extraInfo"]["py_callstack"], stack);
  EXPECT_EQ(doc["message"]["extraInfo"]["timestamp"], "1234567891");
}

TEST(ErrorFileTest, NoPathOrAnUnwritablePathWritesNothing) {
  EXPECT_FALSE(write_error_file("", "m", "s", 0));
  EXPECT_FALSE(write_error_file(nullptr, "m", "s", 0));
  EXPECT_FALSE(write_error_file("/nonexistent-ddp-dir/error.json", "m", "s", 0));
}

}  // namespace
}  // namespace ddp::detail
