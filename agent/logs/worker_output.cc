#include "agent/logs/worker_output.h"

#include <unistd.h>

#include <utility>

#include <spdlog/spdlog.h>

namespace ddprun::agent {

WorkerOutput::WorkerOutput(boost::asio::io_context& io, WorkerOutputOptions options,
                           RunLogFiles& log_files)
    : options_(std::move(options)), log_files_(log_files), router_(io) {}

// One file per stream for the whole attempt, shared by every rank's tee'd stream.
void WorkerOutput::begin_attempt(const RunLogDir& dir, int attempt) {
  dir_ = dir;
  attempt_ = attempt;
  const StdStreams streams[2] = {kStdout, kStderr};
  for (int i = 0; i < 2; ++i) {
    const auto& filters =
        i == 0 ? options_.logs.duplicate_stdout_filters : options_.logs.duplicate_stderr_filters;
    filtered_logs_[i].reset();
    if (filters.empty()) continue;
    auto fd = log_files_.open_log(dir.filtered_log(attempt, streams[i]));
    if (!fd) {
      spdlog::warn("{}", fd.error_message());
      continue;
    }
    filtered_logs_[i] = std::move(*fd);
  }
}

void WorkerOutput::attach(const WorkerLaunch& launch, SpawnedProcess& process) {
  const std::string prefix = line_prefix(options_.logs.line_prefix_template, options_.role,
                                         launch.rank, launch.local_rank, options_.hostname);
  route(process.stdout_pipe, launch.local_rank, kStdout, prefix);
  route(process.stderr_pipe, launch.local_rank, kStderr, prefix);
}

void WorkerOutput::route(UniqueFd& pipe, int local_rank, StdStreams stream,
                         const std::string& prefix) {
  if (!pipe.valid() || !dir_) return;
  const StreamRoute plan = plan_stream(options_.logs, local_rank, stream);
  const bool out = stream == kStdout;
  OutputRouter::Sinks sinks;
  sinks.console_fd = !plan.to_console ? -1 : out ? STDOUT_FILENO : STDERR_FILENO;
  sinks.prefix = plan.teed() ? prefix : "";  // a captured-only stream passes through as is
  if (plan.to_file) {
    sinks.file_path =
        out ? dir_->stdout_log(attempt_, local_rank) : dir_->stderr_log(attempt_, local_rank);
  }
  sinks.duplicate = {filtered_logs_[out ? 0 : 1], out ? options_.logs.duplicate_stdout_filters
                                                      : options_.logs.duplicate_stderr_filters};
  if (plan.captured) {
    sinks.tail = std::make_shared<LineTail>();
    stderr_tails_[local_rank] = sinks.tail;
  }
  if (Status s = router_.attach(std::move(pipe), std::move(sinks)); !s) {
    spdlog::warn("worker {}: {}", local_rank, s.message());
  }
}

std::vector<std::string> WorkerOutput::stderr_lines(int local_rank, int attempt,
                                                    std::size_t count) const {
  auto tail = stderr_tails_.find(local_rank);
  if (tail != stderr_tails_.end()) return tail->second->last(count);
  if (dir_ && plan_stream(options_.logs, local_rank, kStderr).to_file) {
    return log_files_.last_lines(dir_->stderr_log(attempt, local_rank), count);
  }
  return {};
}

}  // namespace ddprun::agent
