// Helpers for the state-store tests: temp dirs, child processes we own (killed by PID when the
// test ends, and by the kernel if the test process dies: PR_SET_PDEATHSIG), reading their
// output lines with deadlines, and a real etcd cluster on loopback ports.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "rendezvous/state/state_store.h"
#include "tests/support/run_until.h"
#include "tests/support/temp_dir.h"

namespace ddprun::rdzv::state::testing {

// The job records of what a store loaded, by job id (for stores saved with job records only).
inline std::map<std::string, std::string> job_records(const std::map<std::string, StoredJob>& all) {
  std::map<std::string, std::string> out;
  for (const auto& [id, job] : all) out.emplace(id, job.job);
  return out;
}

using namespace std::chrono_literals;

using ddprun::testing::TempDir;  // tests/support

// A child process started with fork/exec. Its stdout comes back through a pipe (lines);
// stderr goes to `stderr_path` (or is inherited when empty). SIGKILLed and reaped on
// destruction if still running.
class Child {
 public:
  Child(std::vector<std::string> argv, const std::string& stderr_path = "");
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // SIGKILL and reap. Idempotent.
  void kill();
  // True once the child has exited by itself (reaps it; pid() is then -1).
  bool exited();
  // Closes the child's stdin (a helper takes it as "finish cleanly").
  void close_stdin();
  // Waits (bounded) for the child to exit by itself; its exit code, or -1 on timeout/signal.
  int wait_exit(Millis timeout);
  // The next whole stdout line, waiting at most `timeout`; nullopt on timeout or EOF.
  std::optional<std::string> read_line(Millis timeout);
  // Every whole line still readable without waiting (after the child died, up to EOF).
  std::vector<std::string> drain_lines();
  int stdout_fd() const { return out_; }
  // Moves complete lines from the pipe into the line buffer without blocking; false at EOF.
  bool pump();
  std::vector<std::string>& lines() { return lines_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int in_ = -1;
  bool eof_ = false;
  std::string partial_;
  std::vector<std::string> lines_;  // read but not yet returned by read_line
};

// Waits until `done()` holds, reading every child's stdout meanwhile (poll() on their pipes,
// so the wait wakes on output, not on a timer). False at the deadline.
bool wait_for_output(const std::vector<Child*>& children, const std::function<bool()>& done,
                     Millis timeout);

using ddprun::testing::run_until;  // tests/support

// A port that was free on 127.0.0.1 a moment ago (bound to port 0, then released). A program
// that must be told its port up front (etcd) gets one of these; another process could take it
// in between, which on a test machine is unlikely enough.
uint16_t free_loopback_port();

// A real etcd cluster (Debian's etcd-server) of `members` members on 127.0.0.1: client and
// peer ports found by binding port 0, data in a temp dir, every member killed by PID on
// destruction. Heartbeat 50 ms and election timeout 500 ms, so that losing a member costs
// about half a second and leases may be as short as 1 s.
//
// etcd must be told its ports up front (it has no "port 0"), so a port found free may be taken
// by someone else before etcd binds it: start() then sees a member exit and tries again with
// fresh ports, up to `attempts` times.
class EtcdCluster {
 public:
  explicit EtcdCluster(int members = 3);
  ~EtcdCluster();
  // Starts the members and waits until they serve reads; on a member's early exit (most likely
  // a port taken meanwhile) kills the others and retries with new ports. False when every
  // attempt failed (logs() says why).
  bool start(Millis timeout = 30s, int attempts = 3);
  // Waits (bounded) until every running member serves a linearizable read.
  bool wait_ready(Millis timeout = 20s);
  std::vector<std::string> endpoints() const;  // "127.0.0.1:port", one per member
  std::string endpoint(int member) const;
  void kill_member(int member);
  bool running(int member) const;
  // The last lines of every member's log, for failure messages.
  std::string logs() const;

 private:
  void launch(int attempt);
  bool any_member_exited();

  const int size_;
  TempDir dir_;
  std::string log_dir_;  // the current attempt's data and logs
  std::vector<uint16_t> client_ports_;
  std::vector<std::unique_ptr<Child>> members_;
};

// Where the etcd binary is: /usr/bin/etcd (Debian's etcd-server), or $DDPRUN_ETCD.
std::string etcd_binary();

}  // namespace ddprun::rdzv::state::testing
