// A node's health check (issue 23): a command the cluster team gives (`--health_check`, run by
// /bin/sh -c) that says whether this node is fit to train: GPUs without ECC errors, file systems
// with room, a NIC at speed. The agent runs it before the node joins each round; a node that
// fails it (any exit status but 0, or no answer within `timeout`) does not join, and ddprun
// exits with its own code (kExitUnhealthy) so that SLURM or a node manager can drain it. The
// other nodes go on as after a lost node. configs/health-check.sh is an example.
//
// Built-in checks (issue 38: `builtin:gpu,nic,path=/data`, builtin/node_check_spec.h) run first,
// in a child of their own (ddprun itself, builtin/node_check_main.h), so that a dead mount or a
// wedged driver holds up that child and never the agent; the command, if any, runs after them
// once they pass. One timeout bounds both. The built-in child's findings (one line per problem)
// are the failure's message, and its outcomes per kind go to the outcome handler (metrics).
//
// The check is a child of the agent like its workers (ProcessLauncher: its own process group,
// reaped on the agent's loop), its stdout and stderr go to files beside the run's logs, and
// the last lines of those are in the failure's message. What it uses of the OS is handed in
// (HealthCheckParts, from the agent's AgentParts), so that the agent's lifecycle tests fail a
// check, or let one time out, on a fake launcher and a fake clock.
//
// Not thread-safe: the agent's event loop. One check at a time.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

#include "agent/health/builtin/check_outcome.h"
#include "agent/health/builtin/node_check_spec.h"
#include "agent/options.h"
#include "agent/process/deadline_timer.h"
#include "agent/process/exit_status.h"
#include "agent/process/process_launcher.h"
#include "agent/process/worker_env.h"
#include "common/clock.h"
#include "common/result.h"

namespace ddprun::agent {

// What a check runs on; each must outlive the HealthCheck, which owns both timers (arms and
// cancels them) while it exists.
struct HealthCheckParts {
  ProcessLauncher& launcher;      // starts the command; its exit comes to on_child_exit()
  DeadlineTimer& timeout_timer;   // bounds one run (HealthCheckOptions::timeout)
  DeadlineTimer& interval_timer;  // the wait between periodic runs (HealthCheckOptions::interval)
};

class HealthCheck {
 public:
  // `node_address`: the address this node advertises (builtin:nic checks its interface).
  HealthCheck(HealthCheckParts parts, HealthCheckOptions options,
              std::string node_address = "127.0.0.1");
  ~HealthCheck();  // cancels (kills a running check): the timers outlive it

  bool enabled() const { return !options_.command.empty(); }
  // What each run of the built-in checks found, per kind (gpu, nic, path), once they finish.
  using OutcomeHandler = std::function<void(const std::vector<builtin::CheckOutcome>&)>;
  void set_outcome_handler(OutcomeHandler handler) { on_outcomes_ = std::move(handler); }
  // Runs the check with `env`, its stdout and stderr to `output_base`.stdout / .stderr (the
  // built-in checks' child: `output_base`_builtin.stdout / .stderr / .json). `done` gets ok, or
  // an error saying how it failed (exit status, or the timeout) and the last lines it printed.
  // On success the output files are removed.
  void run(const EnvMap& env, const std::string& output_base, std::function<void(Status)> done);
  // While the workers run: the check every `interval` (HealthCheckOptions::interval; nothing
  // when 0), `on_failure` once when one fails. Until cancel().
  void watch(EnvMap env, std::string output_base, std::function<void(Status)> on_failure);
  // A child of the agent exited: true (and `done` runs) when it was the running check.
  bool on_child_exit(pid_t pid, ExitStatus status);
  // Kills a running check; its `done` never runs. Stops watching.
  void cancel();

 private:
  // One child of a run: the built-in checks, or the command.
  struct Step {
    bool builtin = false;
    std::string output_base;  // its stdout and stderr: <output_base>.stdout / .stderr
  };
  void start(Step step);
  Status failure_of(const Step& step, const ExitStatus& status) const;
  void read_outcomes(const Step& step);
  void finish(Status status);
  void schedule_next();
  void kill_running();

  ProcessLauncher& launcher_;
  const HealthCheckOptions options_;
  const std::string node_address_;
  // options_.command taken apart (builtin/node_check_spec.h); an error when it is not valid
  // (the launcher checks the flag: only a caller that did not is told at run()).
  Result<builtin::HealthCheckValue> value_;
  DeadlineTimer& timer_;      // the running check's timeout
  std::optional<pid_t> pid_;  // the running check's current step
  Step step_;                 // which one
  bool timed_out_ = false;
  std::string output_base_;
  EnvMap env_;  // the run's environment, for its second step
  std::function<void(Status)> done_;
  OutcomeHandler on_outcomes_;
  // watch(): what each periodic run uses, and the wait between runs.
  DeadlineTimer& interval_timer_;
  EnvMap watch_env_;
  std::string watch_base_;
  std::function<void(Status)> on_failure_;  // set while watching
};

// "exit status 3" or "killed by SIGKILL" and the last lines of `stdout_path` and `stderr_path`,
// for the message of a failed check. Pure but for reading those two files.
std::string describe_failed_check(const std::string& how, const std::string& stdout_path,
                                  const std::string& stderr_path);

}  // namespace ddprun::agent
