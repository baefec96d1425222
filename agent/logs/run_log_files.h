// The agent's log files on disk: the run's directory, each attempt's worker directories, the
// filtered logs, and the last lines of a worker's log for its failure report. Behind an
// interface so that the agent's lifecycle tests run without files; DiskRunLogFiles is the real
// one. Where each file goes is RunLogDir's layout (log_layout.h).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/logs/log_layout.h"
#include "agent/options.h"
#include "common/posix_fd.h"
#include "common/result.h"

namespace ddprun::agent {

class RunLogFiles {
 public:
  virtual ~RunLogFiles() = default;
  // Makes the run's directory: under --log_dir, else a temporary one (temporary_parent()).
  virtual Result<RunLogDir> create_run_dir(const LogOptions& logs, const std::string& run_id,
                                           int local_world_size) = 0;
  // Creates attempt_<attempt>/<rank>/ for every local rank, with no stale error file in it.
  virtual Status prepare_attempt(const RunLogDir& dir, int attempt, int local_world_size) = 0;
  // Opens (truncates) a log file the agent writes itself; errors name the path.
  virtual Result<std::shared_ptr<UniqueFd>> open_log(const std::string& path) = 0;
  // The last `max_lines` lines of `path` (empty when it cannot be read).
  virtual std::vector<std::string> last_lines(const std::string& path, std::size_t max_lines) = 0;
  // At the end of the run (RunLogDir::finish): a temporary directory is deleted unless it holds
  // logs or error files, and then moved out of memory. Returns where it was kept.
  virtual std::optional<std::string> finish_run(const RunLogDir& dir) = 0;
};

class DiskRunLogFiles final : public RunLogFiles {
 public:
  Result<RunLogDir> create_run_dir(const LogOptions& logs, const std::string& run_id,
                                   int local_world_size) override;
  Status prepare_attempt(const RunLogDir& dir, int attempt, int local_world_size) override;
  Result<std::shared_ptr<UniqueFd>> open_log(const std::string& path) override;
  std::vector<std::string> last_lines(const std::string& path, std::size_t max_lines) override;
  std::optional<std::string> finish_run(const RunLogDir& dir) override;
};

}  // namespace ddprun::agent
