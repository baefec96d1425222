#include "agent/health/gpu_memory_wait.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace ddprun::agent {
namespace {

// A parent chain longer than this is not followed (pid namespaces nest a few levels at most).
constexpr int kMaxDepth = 64;

pid_t parent_pid_of(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

}  // namespace

bool descends_from(pid_t pid, pid_t ancestor) {
  for (int depth = 0; depth < kMaxDepth && pid > 1; ++depth) {
    pid = parent_pid_of(pid);
    if (pid == ancestor) return true;
  }
  return false;
}

std::string describe_gpu_holders(const std::vector<builtin::GpuProcess>& holders) {
  std::string text;
  for (const builtin::GpuProcess& p : holders) {
    if (!text.empty()) text += ", ";
    text += p.used_bytes
                ? fmt::format("pid {} holds {:.1f} MiB on GPU {}", p.pid,
                              static_cast<double>(*p.used_bytes) / (1 << 20), p.gpu)
                : fmt::format("pid {} holds memory (amount unknown) on GPU {}", p.pid, p.gpu);
  }
  return text;
}

NvmlGpuMemoryWait::NvmlGpuMemoryWait(DeadlineTimer& timer, const Clock& clock,
                                     GpuMemoryWaitOptions options)
    : timer_(timer), clock_(clock), options_(std::move(options)) {}

NvmlGpuMemoryWait::~NvmlGpuMemoryWait() { cancel(); }

void NvmlGpuMemoryWait::wait(std::vector<pid_t> pids, std::function<void(Status)> done) {
  cancel();
  if (options_.bound <= Millis(0)) return done(Status());
  auto nvml = builtin::NvmlLibrary::open(options_.nvml_library);
  if (!nvml) {  // no NVIDIA driver here: nothing to wait for
    spdlog::debug("not waiting for GPU memory: {}", nvml.error_message());
    return done(Status());
  }
  nvml_ = std::move(*nvml);
  pids_ = std::move(pids);
  deadline_ = clock_.steady_now() + options_.bound;
  done_ = std::move(done);
  poll();
}

void NvmlGpuMemoryWait::poll() {
  std::string error;
  const std::vector<builtin::GpuProcess> held = holders(error);
  if (!error.empty()) {
    // NVML cannot list the processes (an old driver, a lost GPU): waiting would not tell more.
    spdlog::warn("not waiting for GPU memory to be released: {}", error);
    return finish(Status());
  }
  if (held.empty()) return finish(Status());
  const SteadyTime now = clock_.steady_now();
  if (now >= deadline_) {
    return finish(Status::timed_out(fmt::format(
        "the last attempt's GPU memory was not released within {} s (--gpu_memory_wait): {}",
        std::chrono::duration<double>(options_.bound).count(), describe_gpu_holders(held))));
  }
  timer_.arm(std::min(options_.poll, std::chrono::duration_cast<Millis>(deadline_ - now)),
             [this] { poll(); });
}

std::vector<builtin::GpuProcess> NvmlGpuMemoryWait::holders(std::string& error) const {
  unsigned count = 0;
  if (const int code = nvml_->device_count(&count); code != builtin::kNvmlSuccess) {
    error = "NVML cannot count the GPUs: " + nvml_->error_string(code);
    return {};
  }
  std::vector<builtin::GpuProcess> all;
  for (unsigned index = 0; index < count; ++index) {
    builtin::NvmlLibrary::Device device = nullptr;
    int code = nvml_->device(index, &device);
    if (code == builtin::kNvmlSuccess) code = nvml_->compute_processes(device, index, &all);
    if (code != builtin::kNvmlSuccess) {
      error =
          fmt::format("NVML cannot list GPU {}'s processes: {}", index, nvml_->error_string(code));
      return {};
    }
  }
  const pid_t self = ::getpid();
  std::vector<builtin::GpuProcess> ours;
  for (const builtin::GpuProcess& p : all) {
    const bool worker = std::find(pids_.begin(), pids_.end(), p.pid) != pids_.end();
    if (worker || descends_from(p.pid, self)) ours.push_back(p);
  }
  return ours;
}

void NvmlGpuMemoryWait::finish(Status status) {
  timer_.cancel();
  nvml_.reset();
  if (auto done = std::exchange(done_, nullptr)) done(std::move(status));
}

void NvmlGpuMemoryWait::cancel() {
  done_ = nullptr;
  timer_.cancel();
  nvml_.reset();
}

}  // namespace ddprun::agent
