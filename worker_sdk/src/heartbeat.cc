#include "ddp/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
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

void write_step(int fd, std::int64_t step) noexcept {
  char text[24];
  auto [end, ec] = std::to_chars(text, text + sizeof text - 1, step);
  if (ec != std::errc()) return;
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

}  // namespace ddp
