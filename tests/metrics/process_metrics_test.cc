// Process metrics: parsing /proc/<pid>/stat (names with spaces and parentheses included), and
// the live values of this test process.
#include "metrics/process_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>

#include <gtest/gtest.h>

#include "common/posix_fd.h"

namespace ddprun::metrics {
namespace {

// A real line's shape: pid, comm, then state and fields 4..52 (utime 14 = 250, stime 15 = 50,
// starttime 22 = 1000, vsize 23 = 8388608, rss 24 = 512 pages).
constexpr const char* kStatLine =
    "4242 (we (ird) name) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 1000 "
    "8388608 512 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";

TEST(ProcessMetrics, ParsesTheFieldsAfterTheLastParenthesis) {
  ProcessStats stats;
  ASSERT_TRUE(parse_proc_stat(kStatLine, 100, 4096, 1'700'000'000, stats).ok());
  EXPECT_DOUBLE_EQ(stats.cpu_seconds, 3.0);  // (250 + 50) / 100
  EXPECT_DOUBLE_EQ(stats.start_time_seconds, 1'700'000'010.0);
  EXPECT_DOUBLE_EQ(stats.virtual_bytes, 8388608.0);
  EXPECT_DOUBLE_EQ(stats.resident_bytes, 512.0 * 4096);
}

TEST(ProcessMetrics, RefusesTruncatedOrGarbledLines) {
  ProcessStats stats;
  EXPECT_TRUE(parse_proc_stat("4242 no parenthesis", 100, 4096, 0, stats).is_malformed());
  EXPECT_TRUE(parse_proc_stat("4242 (x) S 1 2 3", 100, 4096, 0, stats).is_malformed());
  std::string garbled = kStatLine;
  garbled.replace(garbled.find(" 250 "), 5, " 2x0 ");
  Status s = parse_proc_stat(garbled, 100, 4096, 0, stats);
  EXPECT_TRUE(s.is_malformed());
  EXPECT_NE(s.message().find("/proc/self/stat"), std::string::npos) << s.message();
}

TEST(ProcessMetrics, LiveValuesOfThisProcess) {
  UniqueFd extra(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  auto stats = read_process_stats();
  ASSERT_TRUE(stats.ok()) << stats.error_message();
  EXPECT_GT(stats->resident_bytes, 0);
  EXPECT_GE(stats->virtual_bytes, stats->resident_bytes);
  EXPECT_GE(stats->open_fds, 4);  // 0, 1, 2 and `extra`
  EXPECT_GE(stats->max_fds, stats->open_fds);
  EXPECT_GE(stats->cpu_seconds, 0);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(stats->start_time_seconds, now + 1);
  EXPECT_GT(stats->start_time_seconds, now - 24 * 3600) << "this test started within a day";
}

TEST(ProcessMetrics, CollectorAddsTheStandardFamilies) {
  Registry registry;
  add_process_collector(registry);
  const std::string text = registry.render();
  for (const char* line :
       {"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total ",
        "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes ",
        "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes ",
        "# TYPE process_open_fds gauge\nprocess_open_fds ",
        "# TYPE process_max_fds gauge\nprocess_max_fds ",
        "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds "}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
  }
}

}  // namespace
}  // namespace ddprun::metrics
