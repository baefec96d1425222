// Test harness for real multi-process tests of the worker SDK: spawn N ranks of a worker
// binary with the launcher's environment (as ddprun would), or any command, and wait for
// them with a deadline. Every child runs in its own process group; on a deadline, or as soon
// as one rank fails, the harness SIGKILLs the groups it started, so no test hangs or leaks.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace ddp_test {

// The shared TempDir (tests/support), its path as a std::filesystem::path.
class TempDir {
 public:
  std::filesystem::path path() const { return dir_.path(); }

 private:
  ddprun::testing::TempDir dir_;
};

// A TCP port that was free on 127.0.0.1 a moment ago, below the kernel's ephemeral range (so
// that no connection or port-0 server takes it before the program it is given to binds it).
std::uint16_t free_port();

struct ProcessSpec {
  std::vector<std::string> argv;           // argv[0] is the executable's path
  std::map<std::string, std::string> env;  // added to (and overriding) the inherited env
  std::filesystem::path output_file;       // receives stdout and stderr
};

struct ProcessResult {
  int exit_code = -1;              // when it exited
  int term_signal = 0;             // when a signal ended it
  bool killed_by_harness = false;  // deadline passed, or another process failed first
  std::string output;              // stdout + stderr
  bool ok() const { return exit_code == 0; }
  std::string describe() const;
};

struct RunOptions {
  std::chrono::seconds deadline{60};
  // Kill the others as soon as one exits unsuccessfully (ranks would wait on it until their
  // own timeout otherwise).
  bool fail_fast = true;
  // run_ranks: rank 0's worker hosts the job's TCPStore (TORCHELASTIC_USE_AGENT_STORE=False),
  // instead of the harness. Only for tests of that path: a store in rank 0 dies with it, and a
  // rank still using it then hangs or fails (as under torchrun, pytorch#125743).
  bool rank_zero_hosts_store = false;
  // run_ranks: ranks per simulated node (0: all on one node). Rank r then gets LOCAL_RANK
  // r % n, LOCAL_WORLD_SIZE n and GROUP_RANK r / n, as ddprun sets them on each node.
  int ranks_per_node = 0;
};

// Starts every spec at once and waits for all, bounded by options.deadline.
std::vector<ProcessResult> run_processes(const std::vector<ProcessSpec>& specs,
                                         const RunOptions& options = {});

// Runs `world_size` ranks of `binary args...` with RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=<free>, TORCHELASTIC_* set the way
// ddprun sets them (rank 0 hosts the store). Output files go to log_dir/rank_<r>.log.
// "{rank}" in an extra_env value is replaced by the rank (per-rank files).
std::vector<ProcessResult> run_ranks(const std::string& binary,
                                     const std::vector<std::string>& args, int world_size,
                                     const std::filesystem::path& log_dir,
                                     const RunOptions& options = {},
                                     const std::map<std::string, std::string>& extra_env = {});

// All outputs, labelled by rank, for failure messages.
std::string all_output(const std::vector<ProcessResult>& results);

}  // namespace ddp_test
