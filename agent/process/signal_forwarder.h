// Signals that reach the workers without ending the job: SLURM's pre-emption warning
// (`srun --signal=USR1@120`), a user's "checkpoint now". An AgentObserver that keeps the pids
// of the workers that run (from on_worker_started / on_worker_exited) and, on its own
// signal_set on the agent's loop, forwards each caught signal to every running worker's
// process group through ProcessLauncher::signal_group. The agent goes on: the workers decide
// (checkpoint, exit 0, exit non-zero, or ignore it), and their exits are handled as any other.
//
// Compare the agent's handled signals (--signals_to_handle): those end the job (forward, then
// SIGKILL on a second one, exit 128+signal). A signal must not be in both lists (the command
// line refuses it).
//
// A signal that arrives while no worker runs (joining a round, between a failure and the
// restart) is logged and dropped: a worker started later would not have installed its handler
// yet, and the default action of SIGUSR1/SIGUSR2 is to terminate.
#pragma once

#include <sys/types.h>

#include <set>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "agent/agent_observer.h"
#include "agent/process/process_launcher.h"

namespace ddprun::agent {

// Not thread-safe: everything runs on `io`'s thread. `launcher` must outlive it. The signals
// are caught from construction until on_job_finished or destruction.
class SignalForwarder final : public AgentObserver {
 public:
  SignalForwarder(boost::asio::io_context& io, ProcessLauncher& launcher,
                  const std::vector<int>& signals);
  ~SignalForwarder() override;

  void on_worker_started(int local_rank, pid_t pid) override;
  void on_worker_exited(int local_rank, pid_t pid, const ExitStatus& status) override;
  void on_job_finished(int exit_code) override;

  // The process groups a signal goes to now (the running workers' pids).
  const std::set<pid_t>& running() const { return running_; }
  // How many signals were forwarded to at least one group (for tests and logs).
  int forwarded() const { return forwarded_; }
  // What a caught `signo` does: forward it to every running worker group. Public for tests.
  void forward(int signo);

 private:
  void wait();

  ProcessLauncher& launcher_;
  boost::asio::signal_set signals_;
  std::set<pid_t> running_;  // leaders of live worker groups (pgid == pid)
  int forwarded_ = 0;
  bool done_ = false;
};

}  // namespace ddprun::agent
