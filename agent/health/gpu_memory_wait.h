// Before a restart on a GPU node, the next attempt waits until the last attempt's processes no
// longer hold GPU memory (issue 38): the driver frees an exited process's memory a little after
// it is reaped, and workers started before that can die out of memory. `--gpu_memory_wait`
// bounds the wait (0: no wait); a node without NVML, or without NVIDIA GPUs, does not wait.
//
// Whose memory counts: the last attempt's workers (their pids), and any process descended from
// this agent (a worker's children are re-parented to it: it is a child subreaper). Other
// processes on the GPU (another job's) are not waited for.
//
// When the bound runs out the next attempt starts anyway (the user asked for a restart, and
// the memory may be freed meanwhile); the error given to `done` names each pid still holding
// memory, on which GPU, and how much, and the agent logs it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/health/builtin/nvml_library.h"
#include "agent/process/deadline_timer.h"
#include "common/clock.h"
#include "common/result.h"

namespace ddprun::agent {

class GpuMemoryWait {
 public:
  virtual ~GpuMemoryWait() = default;
  // Calls `done` once none of `pids` (nor this agent's descendants) holds GPU memory, or when
  // the bound runs out (an error naming what still holds memory). `done` may run before wait()
  // returns, when there is nothing to wait for. One wait at a time: a second replaces the first.
  virtual void wait(std::vector<pid_t> pids, std::function<void(Status)> done) = 0;
  // Stops waiting; `done` never runs.
  virtual void cancel() = 0;
};

struct GpuMemoryWaitOptions {
  // --gpu_memory_wait: the longest wait; 0: none. Default 30 s.
  Millis bound{30'000};
  // How often NVML is asked: it has no event for memory being freed. Default 250 ms.
  Millis poll{250};
  // The NVML library (builtin::nvml_library_path): libnvidia-ml.so.1 unless a test names one.
  std::string nvml_library = builtin::kNvmlDefaultLibrary;
};

// The real wait: NVML's per-process lists, asked every `poll` on `timer` (the agent's loop).
// NVML is loaded for each wait and unloaded after it. Not thread-safe: the agent's loop.
class NvmlGpuMemoryWait final : public GpuMemoryWait {
 public:
  NvmlGpuMemoryWait(DeadlineTimer& timer, const Clock& clock, GpuMemoryWaitOptions options);
  ~NvmlGpuMemoryWait() override;

  void wait(std::vector<pid_t> pids, std::function<void(Status)> done) override;
  void cancel() override;

 private:
  void poll();
  // The processes of ours holding memory now; `error` set when NVML cannot say.
  std::vector<builtin::GpuProcess> holders(std::string& error) const;
  void finish(Status status);

  DeadlineTimer& timer_;
  const Clock& clock_;
  const GpuMemoryWaitOptions options_;
  std::unique_ptr<builtin::NvmlLibrary> nvml_;  // loaded while waiting
  std::vector<pid_t> pids_;
  SteadyTime deadline_{};
  std::function<void(Status)> done_;  // set while waiting
};

// "pid 1234 holds 1.5 GiB on GPU 0, pid 1240 holds memory (amount unknown) on GPU 1".
std::string describe_gpu_holders(const std::vector<builtin::GpuProcess>& holders);

// Whether `pid`'s parent chain in /proc reaches `ancestor` (false when it cannot be read).
bool descends_from(pid_t pid, pid_t ancestor);

}  // namespace ddprun::agent
