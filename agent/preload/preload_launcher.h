// Warm Python workers (--preload): each node's agent starts one template interpreter that
// imports the listed modules (torch, ...) once, then creates every Python worker of every attempt
// by forking from it, instead of starting a fresh interpreter that imports them again.
//
// PreloadLauncher is a ProcessLauncher in front of the POSIX one. A spawn of the workers' Python
// running a script or `-m` module goes to the template; everything else (health checks, a
// non-Python entry point), and every worker once the template is gone or refused, goes to the
// POSIX launcher as before. The template forks each worker twice over so that the worker is
// re-parented to the agent (a child subreaper, process_launcher.h): the agent reaps it, signals
// its process group and reports its exit exactly as for a process it started itself. What the
// worker does to be indistinguishable from `python -u script` is in agent/preload/template.py
// and docs/preload.md.
//
// Protocol over a Unix stream socket the template connects to (its path in
// DDPRUN_PRELOAD_SOCKET; the agent accepts only its own template, checked by SO_PEERCRED):
//   template → agent   {"ready": true, "modules": [...], "import_seconds": s} | {"error": "..."}
//   agent → template   one JSON line per worker: kind ("script" | "module"), target, args,
//                      env, cwd, cpus; with three descriptors (SCM_RIGHTS): stdin, stdout, stderr
//   template → agent   {"pid": N} | {"error": "..."}
// Calls block the agent's loop, bounded: the first spawn waits for the import (ready_timeout),
// each later one for one fork (fork_timeout, milliseconds in practice).
//
// Not thread-safe: the agent's loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/process/process_launcher.h"
#include "common/clock.h"
#include "common/posix_fd.h"
#include "common/result.h"

namespace ddprun::agent {

struct PreloadOptions {
  std::vector<std::string> modules;  // --preload: imported once, in this order
  std::string python;                // the workers' Python (absolute path)
  std::string python_argv0;          // its argv[0] as the workers get it
  // The fresh workers' bootstrap program (python_bootstrap.h) that follows "-u" in their argv;
  // empty: none.
  std::string bootstrap_program;
  // The template's environment ("KEY=VALUE"): the workers' own, without what differs per rank.
  std::vector<std::string> env;
  // The longest the template may take to import the modules before the first workers start
  // (a cold import from a shared file system takes a minute). Default 600 s.
  Millis ready_timeout{600'000};
  // The longest one fork may take. Default 10 s.
  Millis fork_timeout{10'000};
};

// How the workers of this agent were started, for tests, logs and benchmarks.
struct PreloadStats {
  int warm = 0;   // forked from the template
  int fresh = 0;  // started as fresh processes (not eligible, or the template was unavailable)
  double import_seconds = 0;  // the template's import, once ready
};

class PreloadLauncher final : public ProcessLauncher {
 public:
  PreloadLauncher(PosixProcessLauncher& inner, PreloadOptions options);
  ~PreloadLauncher() override;
  PreloadLauncher(const PreloadLauncher&) = delete;
  PreloadLauncher& operator=(const PreloadLauncher&) = delete;

  // Writes the template's program to a private directory, listens there, and starts the
  // template, which imports while the node joins its first round. On an error (logged) every
  // worker is started fresh.
  Status start();

  void set_exit_handler(ExitHandler handler) override;
  Result<SpawnedProcess> spawn(const SpawnRequest& request) override;
  Status confirm_started(SpawnedProcess& process) override;
  void signal_group(pid_t pgid, int signo) override { inner_.signal_group(pgid, signo); }
  void release_group(pid_t pgid) override { inner_.release_group(pgid); }
  void abandon(pid_t pid) override { inner_.abandon(pid); }
  // No worker will start any more: the template is killed now, so that its teardown overlaps
  // the agent's last work instead of being waited for at the end.
  void workers_done() override;
  int end_all_children(Millis wait_bound) override;

  const PreloadStats& stats() const { return stats_; }
  // Whether workers are forked from the template now.
  bool warm() const { return state_ == State::kReady; }

 private:
  enum class State { kOff, kStarting, kReady, kGone };

  // A worker request the template can serve: nullopt when `request` is not the workers' Python
  // running a script or a module.
  std::optional<std::string> template_request(const SpawnRequest& request) const;
  Status await_ready();
  // The template's next answer (one JSON object per line); its {"error": ...} as an error.
  Result<nlohmann::json> read_answer(std::chrono::steady_clock::time_point deadline,
                                     const char* what);
  Result<SpawnedProcess> fork_warm(const SpawnRequest& request, const std::string& json);
  // The template cannot serve any more: why, logged once; later workers start fresh.
  void give_up(const std::string& why);

  PosixProcessLauncher& inner_;
  PreloadOptions options_;
  ExitHandler exit_handler_;
  State state_ = State::kOff;
  std::string dir_;  // private: the template's program and the socket
  UniqueFd listener_;
  UniqueFd control_;     // the template's connection
  std::string pending_;  // bytes read past the last answer
  pid_t template_pid_ = -1;
  PreloadStats stats_;
};

}  // namespace ddprun::agent
