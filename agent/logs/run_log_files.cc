#include "agent/logs/run_log_files.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "agent/failure_report.h"

namespace ddprun::agent {

Result<RunLogDir> DiskRunLogFiles::create_run_dir(const LogOptions& logs, const std::string& run_id,
                                                  int local_world_size) {
  return RunLogDir::create(logs.log_dir, run_id, [&] {
    return temporary_parent(writes_log_files(logs, local_world_size));
  });
}

Status DiskRunLogFiles::prepare_attempt(const RunLogDir& dir, int attempt, int local_world_size) {
  return dir.prepare_attempt(attempt, local_world_size);
}

Result<std::shared_ptr<UniqueFd>> DiskRunLogFiles::open_log(const std::string& path) {
  auto fd = std::make_shared<UniqueFd>(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644));
  if (!fd->valid()) return Status::error("cannot open " + path + ": " + std::strerror(errno));
  return fd;
}

std::vector<std::string> DiskRunLogFiles::last_lines(const std::string& path,
                                                     std::size_t max_lines) {
  return read_last_lines(path, max_lines);
}

std::optional<std::string> DiskRunLogFiles::finish_run(const RunLogDir& dir) {
  return dir.finish(disk_temporary_parent());
}

}  // namespace ddprun::agent
