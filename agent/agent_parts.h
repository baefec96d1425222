// What the agent uses of the world outside its own logic: processes, the coordinator, the
// clock, the job's store, progress watching, log files, timers, signals and the environment
// its workers start from. The agent is
// handed them (as ninja's Builder is handed its CommandRunner): SystemAgentParts makes the real
// ones; the lifecycle tests hand it fakes that open no port and write no file
// (tests/agent/fake_agent_parts.h).
#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>

#include "agent/coordination/coordinator.h"
#include "agent/coordination/job_store_host.h"
#include "agent/coordination/store_host.h"
#include "agent/health/gpu_memory_wait.h"
#include "agent/logs/run_log_files.h"
#include "agent/options.h"
#include "agent/process/deadline_timer.h"
#include "agent/process/process_inspector.h"
#include "agent/process/process_launcher.h"
#include "agent/process/signal_source.h"
#include "agent/process/worker_channel.h"
#include "agent/process/worker_env.h"
#include "agent/progress/hang_watch.h"
#include "agent/progress/progress_watch.h"
#include "common/clock.h"

namespace ddprun::agent {

// Every part must outlive the agent.
struct AgentParts {
  ProcessLauncher& launcher;
  Coordinator& coordinator;
  const Clock& clock;
  JobStoreHost& store;
  ProgressWatch& progress;
  RunLogFiles& log_files;
  DeadlineTimer& shutdown_timer;         // SIGTERM → SIGKILL (--shutdown_timeout)
  DeadlineTimer& drain_timer;            // bounds the wait for workers' output after they exit
  SignalSource& signals;                 // --signals_to_handle
  WorkerChannel& channel;                // what workers tell before they exit (worker_channel.h)
  DeadlineTimer& hang_timer;             // paces a hang investigation's wait for the other nodes
  DeadlineTimer& health_check_timer;     // bounds one run of --health_check (its timeout)
  DeadlineTimer& health_interval_timer;  // the wait between periodic checks (its interval)
  DeadlineTimer& kill_wait_timer;     // bounds the wait for SIGKILLed workers (--kill_wait_timeout)
  const ProcessInspector& inspector;  // what a worker that survived SIGKILL is doing (/proc)
  GpuMemoryWait& gpu_memory;          // before a restart: the last attempt's GPU memory freed
  // The environment every worker and the health check start from, before the job's variables
  // are added: ddprun's own, read once when it starts (current_environment()).
  const EnvMap& worker_base_env;
};

// The real parts on `io`, for an agent with `options`. Make it before the agent (and as early
// as possible: handled signals are caught from its construction on). `worker_base_env` is the
// process's environment as ddprun read it once at its start (current_environment()).
class SystemAgentParts {
 public:
  SystemAgentParts(boost::asio::io_context& io, const AgentOptions& options, const Clock& clock,
                   EnvMap worker_base_env);

  AgentParts with(ProcessLauncher& launcher, Coordinator& coordinator);

 private:
  const Clock& clock_;
  StoreHost store_;
  HangWatch hang_watch_;
  DiskRunLogFiles log_files_;
  AsioDeadlineTimer shutdown_timer_;
  AsioDeadlineTimer drain_timer_;
  AsioSignalSource signals_;
  std::unique_ptr<WorkerChannel> channel_;  // a UnixWorkerChannel for Python workers
  AsioDeadlineTimer hang_timer_;
  AsioDeadlineTimer health_check_timer_;
  AsioDeadlineTimer health_interval_timer_;
  AsioDeadlineTimer kill_wait_timer_;
  ProcInspector inspector_;
  const EnvMap worker_base_env_;
  AsioDeadlineTimer gpu_memory_timer_;
  NvmlGpuMemoryWait gpu_memory_;  // --gpu_memory_wait, NVML as DDPRUN_NVML_LIBRARY names it
};

}  // namespace ddprun::agent
