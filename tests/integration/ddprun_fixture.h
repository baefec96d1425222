// The fixture every ddprun integration test derives from: a private temp directory (also the
// TMPDIR ddprun sees, so its default log directory lands there), a hermetic environment for
// ddprun, helpers to run it, and a teardown that fails the test if any process it caused is
// still alive (the test process is a child subreaper, so orphans come back to it).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/process_harness.h"
#include "tests/integration/test_files.h"

namespace ddprun::testing {

// The outcome of a ddprun run that was waited for.
struct RunResult {
  pid_t pid = -1;
  std::optional<ChildExit> exit;  // nullopt: still running at the deadline (then SIGKILLed)
  std::string out;                // ddprun's stdout
  std::string err;                // ddprun's stderr

  // "exit code N" / "killed by signal S" / "timed out", then both streams: for failure messages.
  std::string describe() const;
};

// Checks that `run` ended with exit code `code`; otherwise says how it ended, with its output.
::testing::AssertionResult ExitedWith(const RunResult& run, int code);

class DdprunTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The ddprun binary under test.
  static std::string ddprun_binary();
  // A worker in tests/integration/workers/.
  static std::string worker(const std::string& name);
  // The Python with torch that workers run on (PYTHON_EXEC).
  static std::string python();

  // The directory workers write their markers to ($DDPRUN_TEST_OUT), and a path in it.
  std::string out(const std::string& name) const { return out_dir_ + "/" + name; }
  const std::string& out_dir() const { return out_dir_; }
  const TempDir& temp() const { return temp_; }

  // Starts ddprun with `args` in env_ and cwd temp/; nullptr (and a test failure) on error.
  std::unique_ptr<ChildProcess> start_ddprun(const std::vector<std::string>& args);
  // Runs ddprun to its end (SIGKILLed at the deadline) and collects its output.
  RunResult run_ddprun(const std::vector<std::string>& args,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Waits for `child` to end and collects its output (SIGKILLed at the deadline).
  static RunResult finish(ChildProcess& child, Deadline deadline);

  // ddprun's environment; tests may change it before starting ddprun. By default: the test's
  // own environment without PET_*, TORCHELASTIC_*, OMP_NUM_THREADS, PYTHON*, SLURM*,
  // NOTIFY_SOCKET and WATCHDOG_* variables,
  // plus TMPDIR=<temp>/tmp, PYTHON_EXEC=<python()>, DDPRUN_TEST_OUT=<out_dir()>,
  // PYTHONDONTWRITEBYTECODE=1.
  std::map<std::string, std::string> env_;

 private:
  TempDir temp_;
  std::string out_dir_;
};

}  // namespace ddprun::testing
