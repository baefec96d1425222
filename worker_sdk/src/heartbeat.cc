#include "ddp/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>

namespace ddp {
namespace {

constexpr const char* kHeartbeatFileVariable = "DDPRUN_HEARTBEAT_FILE";

std::once_flag g_open_once;
int g_fd = -1;  // written once under g_open_once, read-only afterwards
std::atomic<std::int64_t> g_last_step{0};

int heartbeat_fd() noexcept {
  try {
    std::call_once(g_open_once, [] {
      const char* path = std::getenv(kHeartbeatFileVariable);
      if (path != nullptr && *path != '\0') {
        g_fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      }
    });
  } catch (...) {
    return -1;  // call_once reports thread-library failures by throwing; heartbeats never do
  }
  return g_fd;
}

// "<step>\n", or "<step> <busy seconds>\n" when `busy_seconds` is given.
void write_step(int fd, std::int64_t step, double busy_seconds = -1) noexcept {
  char text[64];
  auto [end, ec] = std::to_chars(text, text + 24, step);
  if (ec != std::errc()) return;
  // At most 10^6 s (what the launcher reads): a busy time beyond that is left out.
  if (std::isfinite(busy_seconds) && busy_seconds >= 0 && busy_seconds < 1e6) {
    *end++ = ' ';
    auto [busy_end, busy_ec] =
        std::to_chars(end, text + sizeof text - 1, busy_seconds, std::chars_format::fixed, 6);
    if (busy_ec != std::errc()) return;
    end = busy_end;
  }
  *end++ = '\n';
  // One pwrite; a short or failed write is left for the next heartbeat to repair.
  (void)!::pwrite(fd, text, static_cast<std::size_t>(end - text), 0);
}

}  // namespace

void heartbeat() noexcept {
  const int fd = heartbeat_fd();
  if (fd >= 0) write_step(fd, g_last_step.load(std::memory_order_relaxed));
}

void heartbeat(std::int64_t step) noexcept {
  g_last_step.store(step, std::memory_order_relaxed);
  const int fd = heartbeat_fd();
  if (fd >= 0) write_step(fd, step);
}

void heartbeat(std::int64_t step, double busy_seconds) noexcept {
  g_last_step.store(step, std::memory_order_relaxed);
  const int fd = heartbeat_fd();
  if (fd >= 0) write_step(fd, step, busy_seconds);
}

}  // namespace ddp
