// The standard process metrics every Prometheus client library exports, by the same names and
// meanings (client_golang's process collector), read from /proc at scrape time:
//
//   process_cpu_seconds_total        user + system CPU time (counter)
//   process_resident_memory_bytes    resident set size
//   process_virtual_memory_bytes     virtual memory size
//   process_open_fds                 open file descriptors
//   process_max_fds                  the soft limit on open file descriptors
//   process_start_time_seconds       start time since the Unix epoch
//
// Each scrape reads /proc/self/stat, /proc/stat (boot time, once) and lists /proc/self/fd:
// small reads of kernel-generated files that do not block.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "metrics/registry.h"

namespace ddprun::metrics {

struct ProcessStats {
  double cpu_seconds = 0;
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double open_fds = 0;
  double max_fds = 0;
  double start_time_seconds = 0;
};

// The CPU, memory and start-time fields of a /proc/<pid>/stat line. `boot_time` is /proc/stat's
// btime (seconds since the epoch). Pure, for tests; errors name the field that is missing.
Status parse_proc_stat(std::string_view stat_line, long clock_ticks, long page_size,
                       double boot_time, ProcessStats& out);

// This process's statistics, now.
Result<ProcessStats> read_process_stats();

// Adds the process_* families to every scrape of `registry`. A scrape whose /proc read fails
// leaves them out (and the rest of the scrape intact).
void add_process_collector(Registry& registry);

}  // namespace ddprun::metrics
