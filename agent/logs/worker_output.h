// The output of an attempt's workers, routed as --redirects, --tee, --local_ranks_filter and
// --duplicate-*-filters ask (plan_stream, log_layout.h): a piped stream goes to the console
// behind its line prefix and to its log file, its lines that match a filter to the attempt's
// filtered log, and a captured stderr stays in memory (LineTail) for the failure report. A
// stream that is not piped went to its file or the console directly; the report then reads its
// file's last lines.
//
// Not thread-safe: the agent's event loop. Like OutputRouter, it must outlive the handlers it
// starts on `io` (destroy it before the io_context, or after run() returned).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "agent/logs/line_tail.h"
#include "agent/logs/log_layout.h"
#include "agent/logs/output_router.h"
#include "agent/logs/run_log_files.h"
#include "agent/options.h"
#include "agent/process/process_launcher.h"
#include "agent/process/worker_group.h"

namespace ddprun::agent {

struct WorkerOutputOptions {
  LogOptions logs;       // the routes, the prefix template and the duplicate filters
  std::string role;      // in the line prefix
  std::string hostname;  // in the line prefix
};

class WorkerOutput {
 public:
  // `log_files` must outlive this.
  WorkerOutput(boost::asio::io_context& io, WorkerOutputOptions options, RunLogFiles& log_files);

  // Attempt `attempt` of the run in `dir` starts: opens its filtered_{stdout,stderr}.log when
  // duplicate filters ask for them (one that cannot be opened is warned about and left out).
  void begin_attempt(const RunLogDir& dir, int attempt);
  // Routes the pipes of a worker of the current attempt that has just started (takes
  // `process`'s stdout_pipe and stderr_pipe; an invalid one is left alone).
  void attach(const WorkerLaunch& launch, SpawnedProcess& process);
  // The last `count` lines the worker of `local_rank` wrote to stderr in `attempt`, when they
  // were captured (in memory, or in its log file); empty otherwise, or before any attempt.
  std::vector<std::string> stderr_lines(int local_rank, int attempt, std::size_t count) const;

  // Calls `done` once every routed pipe has reached end of file (OutputRouter::when_drained).
  void when_drained(std::function<void()> done) { router_.when_drained(std::move(done)); }
  // Stops reading every pipe, flushing what was read (OutputRouter::close_all).
  void close_all() { router_.close_all(); }

 private:
  void route(UniqueFd& pipe, int local_rank, StdStreams stream, const std::string& prefix);

  const WorkerOutputOptions options_;
  RunLogFiles& log_files_;
  OutputRouter router_;
  std::optional<RunLogDir> dir_;                // set by the first begin_attempt
  int attempt_ = 0;                             // the current attempt
  std::shared_ptr<UniqueFd> filtered_logs_[2];  // this attempt's filtered_{stdout,stderr}.log
  // The captured stderr lines by local rank (LogOptions::capture_stderr), of the latest attempt
  // that captured that rank.
  std::map<int, std::shared_ptr<LineTail>> stderr_tails_;
};

}  // namespace ddprun::agent
