// Where each attempt's logs and error files go, laid out as torchrun does:
//   <log_dir>/<run_id>_<random>/attempt_<N>/<local_rank>/{stdout.log,stderr.log,error.json}
// and which of a worker's streams go to the console, to a file, or through the agent.
#pragma once

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

#include "agent/options.h"
#include "common/result.h"

namespace ddprun::agent {

// Where a run's temporary directory goes when --log_dir is not given: $TMPDIR when it is set
// (the user's choice, as for torchrun's tempfile), else /tmp when the run writes log files
// (`writes_log_files`: they can grow large and must not fill memory), else a memory file
// system: $XDG_RUNTIME_DIR (per user, tmpfs by the XDG spec) or /dev/shm, whichever is a
// writable directory, /tmp otherwise. Such a run's directory holds only its error files and
// heartbeat files, a few bytes each, and is deleted when the job succeeds; on a disk file
// system its ~20 directories and files cost milliseconds on every launch and restart (0.03 to
// 0.29 ms per mkdir on our development VM's ext4, idle to loaded), on tmpfs microseconds. `env`
// looks variables up (std::getenv in production).
std::string temporary_parent(bool writes_log_files,
                             const std::function<const char*(const char*)>& env = std::getenv);

// Whether any stream of any of `local_world_size` ranks goes to a log file (plan_stream's
// to_file): redirected, tee'd, or kept out of the console by --local_ranks_filter.
bool writes_log_files(const LogOptions& logs, int local_world_size);

class RunLogDir {
 public:
  RunLogDir() = default;
  // The layout of a directory that is already there (nothing is created).
  explicit RunLogDir(std::string path, bool temporary = false)
      : path_(std::move(path)), temporary_(temporary) {}
  // Creates `<base>/<run_id>_<random>`; with an empty `base`, a fresh directory
  // `ddprun_<run_id>_<random>` under `parent_if_temporary()` that is temporary:
  // remove_if_temporary() deletes it.
  static Result<RunLogDir> create(
      const std::string& base, const std::string& run_id,
      const std::function<std::string()>& parent_if_temporary = [] { return "/tmp"; });

  const std::string& path() const { return path_; }
  std::string attempt_dir(int attempt) const;
  std::string worker_dir(int attempt, int local_rank) const;
  std::string stdout_log(int attempt, int local_rank) const;
  std::string stderr_log(int attempt, int local_rank) const;
  std::string error_file(int attempt, int local_rank) const;
  // attempt_<N>/filtered_stdout.log or filtered_stderr.log (--duplicate-*-filters).
  std::string filtered_log(int attempt, StdStreams stream) const;
  // Creates attempt_<attempt>/<rank>/ for every local rank, with no stale error file in it.
  Status prepare_attempt(int attempt, int local_world_size) const;
  // Deletes the directory when it was made temporary (nothing when the user chose --log_dir).
  void remove_if_temporary() const;
  // At the end of the run, whatever its outcome: a temporary directory is deleted unless it
  // holds something a user needs (a log file or an error file with content; heartbeat files
  // never count). One that is kept and lies in memory ($XDG_RUNTIME_DIR, /dev/shm) moves under
  // `disk_parent`. Returns where it was kept; nullopt when it was deleted, or when it is the
  // user's own --log_dir (left as it is). A failed move keeps it where it is (and says so).
  std::optional<std::string> finish(const std::string& disk_parent) const;
  bool temporary() const { return temporary_; }
  bool in_memory() const { return in_memory_; }

 private:
  std::string path_;
  bool temporary_ = false;
  bool in_memory_ = false;  // temporary, under $XDG_RUNTIME_DIR or /dev/shm
};

// Where a kept temporary directory moves out of memory: $TMPDIR when set, else /tmp.
std::string disk_temporary_parent(const std::function<const char*(const char*)>& env = std::getenv);

// How one stream of one worker is routed.
struct StreamRoute {
  bool to_console = false;  // shown on the agent's console
  bool to_file = false;     // written to attempt_<N>/<rank>/{stdout,stderr}.log
  bool captured = false;    // its last lines are kept in memory (LogOptions::capture_stderr)
  // Tee'd: it reaches the console prefixed, and the log file.
  bool teed() const { return to_console && to_file; }
  // Through the agent (a pipe) rather than straight to its destination: tee'd or captured.
  bool via_agent() const { return teed() || captured; }
};

// The route of `stream` (kStdout or kStderr) for `local_rank`. Redirected streams go to the
// file only; tee'd streams go to both; ranks outside --local_ranks_filter do not reach the
// console, and keep their output in the log file instead.
StreamRoute plan_stream(const LogOptions& logs, int local_rank, StdStreams stream);

// A console line prefix from torchrun's template (`LogOptions::line_prefix_template`):
// ${role_name}, ${rank}, ${local_rank} and ${hostname} replaced, anything else kept as is.
std::string line_prefix(const std::string& templ, const std::string& role, int rank, int local_rank,
                        const std::string& hostname);

}  // namespace ddprun::agent
