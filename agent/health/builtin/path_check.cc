#include "agent/health/builtin/path_check.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "common/posix_fd.h"

namespace ddprun::agent::builtin {
namespace {

constexpr std::string_view kProbe = "ddprun node check: this file is written and removed\n";

std::string last_error_text() { return std::strerror(errno); }

// Opened with a plain blocking open(), as a training job would: on a dead mount this is where
// the check waits.
std::optional<std::string> check_readable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fmt::format("cannot be opened: {}", last_error_text());
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const std::string why =
        errno == ENOTDIR ? "is not a directory" : "cannot be listed: " + last_error_text();
    ::close(fd);
    return why;
  }
  errno = 0;
  const bool listed = ::readdir(dir) != nullptr || errno == 0;
  const std::string why = last_error_text();
  ::closedir(dir);
  if (!listed) return "cannot be listed: " + why;
  return std::nullopt;
}

std::optional<std::string> check_writable(const std::string& path) {
  std::string name = path + "/.ddprun-node-check-XXXXXX";
  UniqueFd fd(::mkostemp(name.data(), O_CLOEXEC));
  if (!fd.valid()) return fmt::format("a file cannot be created in it: {}", last_error_text());
  std::optional<std::string> problem;
  std::string back(kProbe.size(), '\0');
  if (::write(fd.get(), kProbe.data(), kProbe.size()) != static_cast<ssize_t>(kProbe.size())) {
    problem = fmt::format("a file in it cannot be written: {}", last_error_text());
  } else if (::fsync(fd.get()) != 0) {
    problem = fmt::format("a file in it cannot be synced to storage: {}", last_error_text());
  } else if (::pread(fd.get(), back.data(), back.size(), 0) != static_cast<ssize_t>(back.size()) ||
             back != kProbe) {
    problem = "a file written in it does not read back the same";
  }
  if (::unlink(name.c_str()) != 0 && !problem) {
    problem = fmt::format("a file in it cannot be removed: {}", last_error_text());
  }
  return problem;
}

std::string human_bytes(uint64_t bytes) {
  constexpr std::string_view kUnits = "KMGTPE";
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit + 1 < static_cast<int>(kUnits.size())) {
    value /= 1024;
    ++unit;
  }
  if (unit < 0) return fmt::format("{} bytes", bytes);
  return fmt::format("{:.1f} {}iB", value, kUnits[static_cast<size_t>(unit)]);
}

std::optional<std::string> check_free(const std::string& path, uint64_t min_free) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0)
    return fmt::format("statvfs failed: {}", last_error_text());
  const uint64_t available = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (available >= min_free) return std::nullopt;
  return fmt::format("{} free, below min_free {}", human_bytes(available), human_bytes(min_free));
}

}  // namespace

CheckOutcome check_paths(const std::vector<PathCheckSpec>& paths) {
  CheckOutcome outcome{"path", {}};
  for (const PathCheckSpec& spec : paths) {
    // Before the calls that may hang: the last line the agent shows if this one never returns.
    (void)std::fprintf(stderr, "checking path %s\n", spec.path.c_str());
    (void)std::fflush(stderr);
    std::optional<std::string> problem = check_readable(spec.path);
    if (!problem) problem = check_writable(spec.path);
    if (!problem && spec.min_free_bytes > 0) problem = check_free(spec.path, spec.min_free_bytes);
    if (problem) outcome.problems.push_back(fmt::format("path {}: {}", spec.path, *problem));
  }
  return outcome;
}

}  // namespace ddprun::agent::builtin
