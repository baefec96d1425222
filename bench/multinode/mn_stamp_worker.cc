// The multi-node benchmark's worker: records when it started (CLOCK_REALTIME, nanoseconds) in
// $BENCH_OUT/start_n<BENCH_NODE>_w<WORLD_SIZE>_l<LOCAL_RANK>_<pid>, then
//   exits 0 at once when WORLD_SIZE equals argv[1] (or when no argv[1] is given);
//   otherwise waits for a signal (its launcher stopping it for a new round), bounded by
//   argv[2] seconds (default 120), after which it exits 9.
// It relies only on the environment every torchrun-compatible launcher sets.
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string>

namespace {

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string env_or(const char* key, const char* fallback) {
  const char* value = std::getenv(key);
  return value ? value : fallback;
}

// Writes the file atomically (temp + rename) so a reader never sees half of it.
void write_stamp(const std::string& dir, const std::string& name, std::int64_t time) {
  const std::string path = dir + "/" + name;
  const std::string temp = path + ".tmp";
  const std::string text = std::to_string(time) + "\n";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) std::exit(2);
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::exit(2);
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) std::exit(2);
}

void on_alarm(int) { ::_exit(9); }

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t started = now_ns();
  const std::string world = env_or("WORLD_SIZE", "0");
  write_stamp(env_or("BENCH_OUT", "."),
              "start_n" + env_or("BENCH_NODE", "0") + "_w" + world + "_l" +
                  env_or("LOCAL_RANK", "0") + "_" + std::to_string(::getpid()),
              started);
  if (argc < 2 || world == argv[1]) return 0;
  std::signal(SIGALRM, on_alarm);
  ::alarm(argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 120u);
  // Default SIGTERM disposition ends the worker when its launcher stops it.
  for (;;) ::pause();
}
