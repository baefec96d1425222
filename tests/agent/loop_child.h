// Test support for the agent's event-loop units: a child process whose exit wakes an Asio loop
// (through a pidfd), a bounded "run the loop until" helper, and a self-removing temp dir.
// Everything runs on the test's thread; nothing sleeps.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "agent/process/exit_status.h"
#include "tests/support/run_until.h"
#include "tests/support/temp_dir.h"

namespace ddprun::agent::testing {

using ddprun::testing::run_until;  // tests/support
using ddprun::testing::TempDir;

// One child process: the test's environment plus `extra_env`, stdin from /dev/null, stdout and
// stderr shared with the test (so a failing child explains itself in the test log), SIGKILL as
// its parent-death signal, no descriptor beyond 0-2. Its exit is reaped on `io`'s thread when
// the loop runs. Destroying it before that SIGKILLs and reaps it.
class LoopChild {
 public:
  // Null (with a test failure added) when fork or pidfd_open fails.
  static std::unique_ptr<LoopChild> start(boost::asio::io_context& io,
                                          const std::vector<std::string>& argv,
                                          const std::map<std::string, std::string>& extra_env);
  ~LoopChild();
  LoopChild(const LoopChild&) = delete;
  LoopChild& operator=(const LoopChild&) = delete;

  pid_t pid() const { return pid_; }
  // Set once the child has exited and been reaped.
  const std::optional<ExitStatus>& exit() const { return exit_; }
  // Called (on the loop) right after the child is reaped.
  std::function<void(const ExitStatus&)> on_exit;

 private:
  explicit LoopChild(boost::asio::io_context& io) : pidfd_(io) {}
  void watch();

  pid_t pid_ = -1;
  boost::asio::posix::stream_descriptor pidfd_;  // readable once the child has exited
  std::optional<ExitStatus> exit_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // guards the pending wait
};

}  // namespace ddprun::agent::testing
