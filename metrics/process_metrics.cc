#include "metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

namespace ddprun::metrics {
namespace {

// /proc/stat's "btime <seconds>": the boot time, fixed for the life of the machine.
std::optional<double> read_boot_time() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && (in >> value)) return value;
    in.ignore(1 << 16, '\n');
  }
  return std::nullopt;
}

std::optional<std::string> read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  return line;
}

// Entries of /proc/self/fd other than "." and "..", the directory's own descriptor included
// (as client_golang counts them).
std::optional<double> count_open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return std::nullopt;
  double count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count;
}

FamilyData gauge(const char* name, const char* help, double value) {
  FamilyData family{name, help, MetricType::kGauge, {}};
  family.add({}, value);
  return family;
}

}  // namespace

Status parse_proc_stat(std::string_view line, long clock_ticks, long page_size, double boot_time,
                       ProcessStats& out) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the fields after the
  // last ')' are unambiguous. Field numbers below are proc(5)'s, counting pid as 1.
  const size_t close = line.rfind(')');
  if (close == std::string_view::npos) return Status::malformed("/proc/self/stat: no ')'");
  std::istringstream fields{std::string(line.substr(close + 1))};
  std::vector<std::string> f;  // f[0] is field 3 (state)
  for (std::string item; fields >> item && f.size() < 22;) f.push_back(item);
  if (f.size() < 22) return Status::malformed("/proc/self/stat: fewer than 24 fields");
  auto number = [&](int field, double& value) {
    const std::string& text = f[static_cast<size_t>(field - 3)];
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && end == text.data() + text.size();
  };
  double utime = 0, stime = 0, start_ticks = 0, vsize = 0, rss_pages = 0;
  if (!number(14, utime) || !number(15, stime) || !number(22, start_ticks) || !number(23, vsize) ||
      !number(24, rss_pages)) {
    return Status::malformed("/proc/self/stat: a CPU, memory or start-time field is not a number");
  }
  const double ticks = static_cast<double>(clock_ticks);
  out.cpu_seconds = (utime + stime) / ticks;
  out.start_time_seconds = boot_time + start_ticks / ticks;
  out.virtual_bytes = vsize;
  out.resident_bytes = rss_pages * static_cast<double>(page_size);
  return {};
}

Result<ProcessStats> read_process_stats() {
  static const std::optional<double> boot_time = read_boot_time();
  if (!boot_time) return Status::error("/proc/stat: no btime line");
  auto line = read_first_line("/proc/self/stat");
  if (!line) return Status::error("cannot read /proc/self/stat");
  ProcessStats stats;
  if (Status s = parse_proc_stat(*line, ::sysconf(_SC_CLK_TCK), ::sysconf(_SC_PAGESIZE), *boot_time,
                                 stats);
      !s) {
    return s;
  }
  auto fds = count_open_fds();
  if (!fds) return Status::error("cannot list /proc/self/fd");
  stats.open_fds = *fds;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) stats.max_fds = static_cast<double>(limit.rlim_cur);
  return stats;
}

void add_process_collector(Registry& registry) {
  registry.add_collector([](std::vector<FamilyData>& out) {
    auto stats = read_process_stats();
    if (!stats) return;
    FamilyData cpu{"process_cpu_seconds_total",
                   "Total user and system CPU time spent in seconds.",
                   MetricType::kCounter,
                   {}};
    cpu.add({}, stats->cpu_seconds);
    out.push_back(std::move(cpu));
    out.push_back(gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
                        stats->resident_bytes));
    out.push_back(gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                        stats->virtual_bytes));
    out.push_back(gauge("process_open_fds", "Number of open file descriptors.", stats->open_fds));
    out.push_back(
        gauge("process_max_fds", "Maximum number of open file descriptors.", stats->max_fds));
    out.push_back(gauge("process_start_time_seconds",
                        "Start time of the process since unix epoch in seconds.",
                        stats->start_time_seconds));
  });
}

}  // namespace ddprun::metrics
