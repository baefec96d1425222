#include "snapshot_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ddp::detail {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kPrefix = "snapshot-";
constexpr std::string_view kSuffix = ".ddpsnap";
constexpr std::string_view kTempPrefix = ".tmp-snapshot-";

std::string errno_text(const std::string& what, const fs::path& path) {
  return what + " " + path.string() + ": " + std::strerror(errno);
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

// This host's temp files start with this.
std::string temp_prefix() { return std::string(kTempPrefix) + host_name() + "-"; }

// Makes a rename in `dir` durable.
std::string fsync_directory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_text("cannot open directory", dir);
  const int rc = ::fsync(fd);
  std::string error = rc != 0 ? errno_text("cannot fsync directory", dir) : "";
  ::close(fd);
  return error;
}

}  // namespace

std::string snapshot_file_name(int64_t global_step) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%012lld", static_cast<long long>(global_step));
  return std::string(kPrefix) + digits + std::string(kSuffix);
}

int64_t snapshot_step_of(const fs::path& path) {
  const std::string name = path.filename().string();
  if (name.size() != kPrefix.size() + 12 + kSuffix.size() || name.rfind(kPrefix, 0) != 0 ||
      name.substr(name.size() - kSuffix.size()) != kSuffix) {
    return -1;
  }
  const std::string digits = name.substr(kPrefix.size(), 12);
  if (!std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

std::vector<fs::path> list_snapshots(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = snapshot_step_of(entry.path());
    if (step >= 0) found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> out;
  for (auto& item : found) out.push_back(std::move(item.second));
  return out;
}

std::string directory_identity(const fs::path& dir, std::string* error) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create " + dir.string() + ": " + ec.message();
    return "";
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    *error = errno_text("cannot stat", dir);
    return "";
  }
  error->clear();
  return host_name() + ":" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

DurableFile::DurableFile(fs::path dir, int64_t global_step)
    : dir_(std::move(dir)), target_(dir_ / snapshot_file_name(global_step)) {
  temp_ = dir_ / (temp_prefix() + std::to_string(global_step) + "-" + std::to_string(::getpid()));
}

DurableFile::~DurableFile() {
  if (fd_ < 0) return;
  // Never committed: the temp file is incomplete, and nobody else will remove it.
  ::close(fd_);
  std::error_code ec;
  fs::remove(temp_, ec);
}

std::string DurableFile::open() {
  if (!error_.empty()) return error_;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) error_ = errno_text("cannot create", temp_);
  return error_;
}

std::string DurableFile::append(const char* data, std::size_t size) {
  if (!error_.empty()) return error_;
  std::size_t written = 0;
  while (written < size) {
    ssize_t n = ::write(fd_, data + written, size - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error_ = errno_text("cannot write", temp_);
    written += static_cast<std::size_t>(n);
  }
  return "";
}

std::string DurableFile::commit() {
  if (!error_.empty()) return error_;
  if (::fsync(fd_) != 0) return error_ = errno_text("cannot fsync", temp_);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return error_ = errno_text("cannot close", temp_);
  snapshot_fail_point_before_rename();
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    return error_ = errno_text("cannot rename " + temp_.string() + " to", target_);
  }
  return error_ = fsync_directory(dir_);
}

std::string publish_snapshot(const fs::path& dir, int64_t global_step, const std::string& bytes,
                             std::size_t keep_last) {
  DurableFile file(dir, global_step);
  std::string error = file.open();
  if (error.empty()) remove_stale_temps(dir);
  if (error.empty()) error = file.append(bytes.data(), bytes.size());
  if (error.empty()) error = file.commit();
  if (error.empty()) keep_newest(dir, keep_last);
  return error;
}

void keep_newest(const fs::path& dir, std::size_t keep_last) {
  const auto all = list_snapshots(dir);
  std::error_code ec;
  for (std::size_t i = keep_last; i < all.size(); ++i) fs::remove(all[i], ec);
}

void remove_stale_temps(const fs::path& dir) {
  const std::string prefix = temp_prefix();
  const std::string mine = "-" + std::to_string(::getpid());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // Ours in flight end in our pid; only this process writes them.
    if (name.rfind(prefix, 0) != 0) continue;
    if (name.size() >= mine.size() &&
        name.compare(name.size() - mine.size(), mine.size(), mine) == 0) {
      continue;
    }
    std::error_code ignored;
    fs::remove(entry.path(), ignored);
  }
}

std::string read_whole_file(const fs::path& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = errno_text("cannot open", path);
    return "";
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) {
    *error = "cannot read " + path.string();
    return "";
  }
  error->clear();
  return out.str();
}

void snapshot_fail_point_before_rename() {
  const char* fail_point = std::getenv("DDP_TEST_FAILPOINT");
  if (fail_point && std::strcmp(fail_point, "kill_before_snapshot_rename") == 0) {
    ::raise(SIGKILL);
  }
}

}  // namespace ddp::detail
