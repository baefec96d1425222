#include "tests/worker_sdk/multiproc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "tests/store/store_test_util.h"
#include "tests/support/free_port.h"
#include "tests/support/text_file.h"

extern char** environ;

namespace ddp_test {
namespace fs = std::filesystem;

std::uint16_t free_port() { return ddprun::testing::free_port_outside_ephemeral_range(); }

std::string ProcessResult::describe() const {
  std::ostringstream out;
  if (killed_by_harness) out << "killed by the harness (deadline or another process failed); ";
  if (term_signal != 0) {
    out << "signal " << term_signal;
  } else {
    out << "exit code " << exit_code;
  }
  return out.str();
}

namespace {

// Variables a launcher sets: never inherit them from the test's own environment.
bool is_launcher_var(const std::string& name) {
  static const char* kNames[] = {"RANK",       "WORLD_SIZE", "LOCAL_RANK",  "LOCAL_WORLD_SIZE",
                                 "GROUP_RANK", "ROLE_RANK",  "MASTER_ADDR", "MASTER_PORT"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return name.rfind("TORCHELASTIC_", 0) == 0;
}

std::vector<std::string> build_env(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    if (is_launcher_var(name) || overrides.count(name)) continue;
    out.push_back(entry);
  }
  for (const auto& [k, v] : overrides) out.push_back(k + "=" + v);
  return out;
}

pid_t spawn(const ProcessSpec& spec) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, spec.output_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group, so we can kill what it starts

  std::vector<std::string> env = build_env(spec.env);
  std::vector<char*> argv_ptrs, env_ptrs;
  for (const auto& a : spec.argv) argv_ptrs.push_back(const_cast<char*>(a.c_str()));
  argv_ptrs.push_back(nullptr);
  for (const auto& e : env) env_ptrs.push_back(const_cast<char*>(e.c_str()));
  env_ptrs.push_back(nullptr);
  pid_t pid = -1;
  int rc =
      ::posix_spawn(&pid, spec.argv[0].c_str(), &actions, &attr, argv_ptrs.data(), env_ptrs.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("posix_spawn " + spec.argv[0] + ": " + std::strerror(rc));
  return pid;
}

void record_status(ProcessResult& result, int status) {
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
}

}  // namespace

std::vector<ProcessResult> run_processes(const std::vector<ProcessSpec>& specs,
                                         const RunOptions& options) {
  const auto deadline = std::chrono::steady_clock::now() + options.deadline;
  std::vector<ProcessResult> results(specs.size());
  std::vector<pid_t> pids;
  std::vector<int> pidfds;
  std::vector<bool> done(specs.size(), false);
  for (const auto& spec : specs) {
    pids.push_back(spawn(spec));
    // A pidfd becomes readable when the child exits: an event to poll, no sleep loop.
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pids.back(), 0));
    if (fd < 0) throw std::runtime_error("pidfd_open: " + std::string(std::strerror(errno)));
    pidfds.push_back(fd);
  }
  auto kill_remaining = [&] {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      ::kill(-pids[i], SIGKILL);  // the child's group: it and anything it started
      results[i].killed_by_harness = true;
    }
  };
  std::size_t remaining = specs.size();
  while (remaining > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) kill_remaining();
    std::vector<pollfd> fds;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (!done[i]) {
        fds.push_back(pollfd{pidfds[i], POLLIN, 0});
        index.push_back(i);
      }
    }
    int n =
        ::poll(fds.data(), fds.size(), left.count() > 0 ? static_cast<int>(left.count()) : 1000);
    if (n < 0 && errno != EINTR) throw std::runtime_error("poll failed");
    for (std::size_t k = 0; n > 0 && k < fds.size(); ++k) {
      if (!(fds[k].revents & POLLIN)) continue;
      const std::size_t i = index[k];
      int status = 0;
      ::waitpid(pids[i], &status, 0);
      ::kill(-pids[i], SIGKILL);  // grandchildren left in its group
      record_status(results[i], status);
      done[i] = true;
      --remaining;
      if (options.fail_fast && !results[i].ok()) kill_remaining();
    }
  }
  for (std::size_t i = 0; i < specs.size(); ++i) {
    ::close(pidfds[i]);
    results[i].output = ddprun::testing::read_text_file(specs[i].output_file);
  }
  return results;
}

namespace {

std::vector<ProcessSpec> rank_specs(const std::string& binary, const std::vector<std::string>& args,
                                    int world_size, const fs::path& log_dir,
                                    const std::map<std::string, std::string>& extra_env,
                                    const std::string& port, bool agent_store, int ranks_per_node) {
  const int per_node = ranks_per_node > 0 ? ranks_per_node : world_size;
  std::vector<ProcessSpec> specs;
  for (int rank = 0; rank < world_size; ++rank) {
    ProcessSpec spec;
    spec.argv.push_back(binary);
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    for (const auto& [name, value] : extra_env) {
      std::string v = value;
      for (auto at = v.find("{rank}"); at != std::string::npos; at = v.find("{rank}")) {
        v.replace(at, 6, std::to_string(rank));
      }
      spec.env[name] = v;
    }
    spec.env["RANK"] = std::to_string(rank);
    spec.env["LOCAL_RANK"] = std::to_string(rank % per_node);
    spec.env["GROUP_RANK"] = std::to_string(rank / per_node);
    spec.env["WORLD_SIZE"] = std::to_string(world_size);
    spec.env["LOCAL_WORLD_SIZE"] = std::to_string(per_node);
    spec.env["MASTER_ADDR"] = "127.0.0.1";
    spec.env["MASTER_PORT"] = port;
    spec.env["TORCHELASTIC_USE_AGENT_STORE"] = agent_store ? "True" : "False";
    spec.env["TORCHELASTIC_RESTART_COUNT"] = "0";
    spec.env["TORCHELASTIC_RUN_ID"] = "sdk_test";
    spec.env["OMP_NUM_THREADS"] = "1";
    spec.output_file = log_dir / ("rank_" + std::to_string(rank) + ".log");
    specs.push_back(std::move(spec));
  }
  return specs;
}

// Rank 0 could not bind MASTER_PORT: another process took the port between free_port()
// letting it go and rank 0's TCPStore binding it (a Gloo connection of a test running beside
// this one draws from the same ephemeral range).
bool lost_the_port(const std::vector<ProcessResult>& results) {
  return !results.empty() && !results[0].ok() &&
         results[0].output.find("Address already in use") != std::string::npos;
}

}  // namespace

std::vector<ProcessResult> run_ranks(const std::string& binary,
                                     const std::vector<std::string>& args, int world_size,
                                     const fs::path& log_dir, const RunOptions& options,
                                     const std::map<std::string, std::string>& extra_env) {
  if (!options.rank_zero_hosts_store) {
    // The harness hosts the job's store, as ddprun's agent does: it outlives every rank (a
    // rank 0 that finished first took a worker-hosted store with it, and the others hung: the
    // flaky PowerSgdTest), and it listens on port 0 before any rank starts (no port race).
    ddprun::store::testing::StoreThread store;
    return run_processes(
        rank_specs(binary, args, world_size, log_dir, extra_env, std::to_string(store.port()),
                   /*agent_store=*/true, options.ranks_per_node),
        options);
  }
  // A port found free can be taken before it is bound; like torch's own distributed tests
  // (retry_on_connect_failures), run again on a fresh port when that, and only that, happened.
  // The store is rank 0's first act, so nothing else of the run has happened yet.
  constexpr int kTries = 3;
  for (int attempt = 1;; ++attempt) {
    const std::string port = std::to_string(free_port());
    auto results = run_processes(rank_specs(binary, args, world_size, log_dir, extra_env, port,
                                            /*agent_store=*/false, options.ranks_per_node),
                                 options);
    if (attempt == kTries || !lost_the_port(results)) return results;
    std::cerr << "run_ranks: port " << port << " was taken before rank 0 bound it; again on "
              << "a fresh port (try " << attempt + 1 << " of " << kTries << ")\n";
  }
}

std::string all_output(const std::vector<ProcessResult>& results) {
  std::ostringstream out;
  for (std::size_t i = 0; i < results.size(); ++i) {
    out << "---- process " << i << " (" << results[i].describe() << ") ----\n"
        << results[i].output << "\n";
  }
  return out.str();
}

}  // namespace ddp_test
