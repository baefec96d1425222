#include "agent/logs/log_layout.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

namespace ddprun::agent {
namespace fs = std::filesystem;

namespace {

bool writable_directory(const char* path) {
  struct stat st {};
  return path && *path && ::stat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
         ::access(path, W_OK | X_OK) == 0;
}

}  // namespace

std::string temporary_parent(bool writes_log_files,
                             const std::function<const char*(const char*)>& env) {
  if (const char* tmp = env("TMPDIR"); tmp && *tmp) return tmp;
  if (!writes_log_files) {
    if (const char* runtime = env("XDG_RUNTIME_DIR"); writable_directory(runtime)) return runtime;
    if (writable_directory("/dev/shm")) return "/dev/shm";
  }
  return "/tmp";
}

bool writes_log_files(const LogOptions& logs, int local_world_size) {
  for (int rank = 0; rank < local_world_size; ++rank) {
    if (plan_stream(logs, rank, kStdout).to_file || plan_stream(logs, rank, kStderr).to_file) {
      return true;
    }
  }
  return false;
}

Result<RunLogDir> RunLogDir::create(const std::string& base, const std::string& run_id,
                                    const std::function<std::string()>& parent_if_temporary) {
  RunLogDir dir;
  std::string parent = base;
  if (parent.empty()) {
    parent = parent_if_temporary();
    dir.temporary_ = true;
  }
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return Status::error("cannot create log directory " + parent + ": " + ec.message());
  std::string name = (dir.temporary_ ? "ddprun_" : "") + run_id + "_XXXXXX";
  std::string templ = (fs::path(parent) / name).string();
  if (::mkdtemp(templ.data()) == nullptr) {
    return Status::error("cannot create log directory in " + parent + ": " + std::strerror(errno));
  }
  dir.path_ = templ;
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  dir.in_memory_ =
      dir.temporary_ && (parent == "/dev/shm" || (runtime && *runtime && parent == runtime));
  return dir;
}

std::string RunLogDir::worker_dir(int attempt, int local_rank) const {
  return path_ + "/attempt_" + std::to_string(attempt) + "/" + std::to_string(local_rank);
}
std::string RunLogDir::stdout_log(int attempt, int local_rank) const {
  return worker_dir(attempt, local_rank) + "/stdout.log";
}
std::string RunLogDir::stderr_log(int attempt, int local_rank) const {
  return worker_dir(attempt, local_rank) + "/stderr.log";
}
std::string RunLogDir::error_file(int attempt, int local_rank) const {
  return worker_dir(attempt, local_rank) + "/error.json";
}

Status RunLogDir::prepare_attempt(int attempt, int local_world_size) const {
  // One mkdir per directory (create_directories would stat every parent for every rank):
  // this runs on the launch and the restart path.
  auto make = [](const std::string& path) -> Result<bool> {  // true: it was there already
    if (::mkdir(path.c_str(), 0777) == 0) return false;      // 0777 less the umask, as mkdir(1)
    if (errno == EEXIST) return true;
    return Status::error("cannot create " + path + ": " + std::strerror(errno));
  };
  if (auto made = make(attempt_dir(attempt)); !made) return made.status();
  for (int rank = 0; rank < local_world_size; ++rank) {
    auto existed = make(worker_dir(attempt, rank));
    if (!existed) return existed.status();
    // A stale file would be taken for a new error.
    if (existed.value()) ::unlink(error_file(attempt, rank).c_str());
  }
  return {};
}

void RunLogDir::remove_if_temporary() const {
  if (!temporary_ || path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);  // best effort: a leftover temp dir is harmless
}

std::string disk_temporary_parent(const std::function<const char*(const char*)>& env) {
  if (const char* tmp = env("TMPDIR"); tmp && *tmp) return tmp;
  return "/tmp";
}

namespace {

// A log or error file with content: what a user may need after the run. Heartbeat files (the
// attempt's progress/ directory) are the agent's own.
bool holds_user_files(const fs::path& dir) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && it->path().filename() == "progress") {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec) && it->file_size(ec) > 0 && !ec) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> RunLogDir::finish(const std::string& disk_parent) const {
  if (!temporary_ || path_.empty()) return std::nullopt;
  std::error_code ec;
  if (!holds_user_files(path_)) {
    fs::remove_all(path_, ec);
    return std::nullopt;
  }
  if (!in_memory_) return path_;
  // Out of memory, file by file (another file system: no rename); progress/ stays behind.
  const fs::path target = fs::path(disk_parent) / fs::path(path_).filename();
  fs::create_directories(target, ec);
  for (fs::recursive_directory_iterator it(path_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path to = target / fs::relative(it->path(), path_, ec);
    if (it->is_directory(ec)) {
      if (it->path().filename() == "progress") {
        it.disable_recursion_pending();
      } else {
        fs::create_directories(to, ec);
      }
    } else if (it->is_regular_file(ec)) {
      fs::copy_file(it->path(), to, fs::copy_options::overwrite_existing, ec);
    }
  }
  if (ec) {
    spdlog::warn("could not move the run's files from {} to {}: {}; they stay where they are",
                 path_, target.string(), ec.message());
    return path_;
  }
  fs::remove_all(path_, ec);
  return target.string();
}

StreamRoute plan_stream(const LogOptions& logs, int local_rank, StdStreams stream) {
  const bool redirected = (logs.redirects.for_rank(local_rank) & stream) != 0;
  const bool teed = (logs.tee.for_rank(local_rank) & stream) != 0;
  const auto& shown = logs.console_ranks;
  const bool in_filter =
      shown.empty() || std::find(shown.begin(), shown.end(), local_rank) != shown.end();
  StreamRoute route;
  route.to_console = in_filter && (teed || !redirected);
  route.to_file = redirected || teed || !in_filter;
  route.captured = stream == kStderr && logs.capture_stderr;
  return route;
}

std::string RunLogDir::attempt_dir(int attempt) const {
  return path_ + "/attempt_" + std::to_string(attempt);
}

std::string RunLogDir::filtered_log(int attempt, StdStreams stream) const {
  return path_ + "/attempt_" + std::to_string(attempt) +
         (stream == kStdout ? "/filtered_stdout.log" : "/filtered_stderr.log");
}

std::string line_prefix(const std::string& templ, const std::string& role, int rank, int local_rank,
                        const std::string& hostname) {
  if (templ.empty()) return "[" + role + std::to_string(local_rank) + "]:";
  const std::pair<const char*, std::string> macros[] = {
      {"${role_name}", role},
      {"${rank}", std::to_string(rank)},
      {"${local_rank}", std::to_string(local_rank)},
      {"${hostname}", hostname}};
  std::string out;
  for (std::size_t i = 0; i < templ.size();) {
    bool replaced = false;
    for (const auto& [name, value] : macros) {
      if (templ.compare(i, std::strlen(name), name) == 0) {
        out += value;
        i += std::strlen(name);
        replaced = true;
        break;
      }
    }
    if (!replaced) out += templ[i++];
  }
  return out;
}

}  // namespace ddprun::agent
