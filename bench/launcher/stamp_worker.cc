// A benchmark worker that records CLOCK_REALTIME timestamps (nanoseconds) in $BENCH_OUT, for
// measuring a launcher's reaction times from outside. It relies only on the environment every
// torchrun-compatible launcher sets (LOCAL_RANK, LOCAL_WORLD_SIZE, TORCHELASTIC_RESTART_COUNT).
//
// On restart 0:
//   local rank 0 waits (inotify, bounded) until every sibling has written ready_<rank>, then
//     writes fail_0 = the time just before it exits 1;
//   every other rank installs a SIGTERM handler, writes ready_<rank> and waits; the handler
//     writes sigterm_<rank> = the time the signal arrived, then exits 143.
// On restart N > 0, every rank writes start_<N>_<rank> = the time it started, then exits 0.
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace {

constexpr int kReadyTimeoutMs = 60000;

std::string out_dir;      // set before any handler is installed; read-only afterwards
char sigterm_path[4096];  // prepared for the handler, which must not allocate

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Decimal digits of `value` into `buffer` (at least 21 bytes) with a newline; returns the
// length. Async-signal-safe (no stdio).
std::size_t format_ns(std::int64_t value, char* buffer) {
  char digits[20];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < sizeof digits);
  for (std::size_t i = 0; i < n; ++i) buffer[i] = digits[n - 1 - i];
  buffer[n] = '\n';
  return n + 1;
}

// Writes `time` to `path`. Async-signal-safe. Readers wait for the file to be complete by
// watching IN_CLOSE_WRITE, or read it after the launcher has exited.
void write_time(const char* path, std::int64_t time) {
  char buffer[32];
  const std::size_t n = format_ns(time, buffer);
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t ignored = ::write(fd, buffer, n);
  (void)ignored;
  ::close(fd);
}

void on_sigterm(int) {
  write_time(sigterm_path, now_ns());
  ::_exit(143);
}

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : -1;
}

// Waits until every ready_<rank> of ranks 1..world-1 exists, or the timeout passes.
bool wait_for_siblings(int world) {
  const int inotify = ::inotify_init1(IN_CLOEXEC);
  if (inotify < 0) return false;
  ::inotify_add_watch(inotify, out_dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE);
  const std::int64_t deadline = now_ns() + std::int64_t{kReadyTimeoutMs} * 1000000;
  for (;;) {
    int missing = 0;
    for (int rank = 1; rank < world; ++rank) {
      const std::string path = out_dir + "/ready_" + std::to_string(rank);
      if (::access(path.c_str(), F_OK) != 0) ++missing;
    }
    if (missing == 0) break;
    const std::int64_t left_ms = (deadline - now_ns()) / 1000000;
    pollfd p{inotify, POLLIN, 0};
    if (left_ms <= 0 || ::poll(&p, 1, static_cast<int>(left_ms)) <= 0) {
      ::close(inotify);
      return false;
    }
    char events[4096];
    ssize_t ignored = ::read(inotify, events, sizeof events);
    (void)ignored;
  }
  ::close(inotify);
  return true;
}

}  // namespace

int main() {
  const char* dir = std::getenv("BENCH_OUT");
  const int rank = env_int("LOCAL_RANK");
  const int world = env_int("LOCAL_WORLD_SIZE");
  const int restart = env_int("TORCHELASTIC_RESTART_COUNT");
  if (dir == nullptr || rank < 0 || world < 1 || restart < 0) {
    std::fprintf(stderr, "stamp_worker: needs BENCH_OUT and a launcher's worker environment\n");
    return 2;
  }
  out_dir = dir;
  if (restart > 0) {
    const std::int64_t started = now_ns();
    const std::string path =
        out_dir + "/start_" + std::to_string(restart) + "_" + std::to_string(rank);
    write_time(path.c_str(), started);
    return 0;
  }
  if (rank == 0) {
    if (!wait_for_siblings(world)) {
      std::fprintf(stderr, "stamp_worker: siblings never became ready\n");
      return 2;
    }
    const std::string path = out_dir + "/fail_0";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    char buffer[32];
    const std::size_t n = format_ns(now_ns(), buffer);  // the last thing before exiting
    ssize_t ignored = ::write(fd, buffer, n);
    (void)ignored;
    ::_exit(1);
  }
  std::snprintf(sigterm_path, sizeof sigterm_path, "%s/sigterm_%d", dir, rank);
  struct sigaction action {};
  action.sa_handler = on_sigterm;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  const std::string ready = out_dir + "/ready_" + std::to_string(rank);
  write_time((ready + ".tmp").c_str(), now_ns());
  std::rename((ready + ".tmp").c_str(), ready.c_str());
  for (;;) ::pause();
}
