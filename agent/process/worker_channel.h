// The worker channel: what a running worker tells its agent before it exits. Three notices: a
// Python worker's uncaught exception, sent by ddprun's bootstrap (python_bootstrap.h) the
// moment the interpreter reports it, so that the agent stops the other workers while the
// failing interpreter is still shutting down (torch 2.x takes a large part of a second there);
// and a rank's request to stop the job for good (ddprun.stop_job, ddp::stop_job), after which
// the agent ends the job without a restart (exit 79, "do not requeue"); and a rank's request to
// take its node out of the job (ddprun.exclude_node, ddp::exclude_node: "my GPU is bad"), after
// which the agent stops its workers and leaves the job unfit (exit 69), so that a waiting spare
// takes the node's place.
//
// Contract with workers: DDPRUN_WORKER_SOCKET names an AF_UNIX datagram socket of the agent,
// in a private directory (mode 0700: only the agent's user can reach it). A notice is one
// datagram of UTF-8 JSON, at most kMaxNoticeBytes:
//   {"event": "exception", "local_rank": 1, "pid": 4242, "message": "RuntimeError: boom"}
//   {"event": "stop_job", "local_rank": 1, "pid": 4242, "reason": "NaN loss at step 1200"}
//   {"event": "exclude_node", "local_rank": 3, "pid": 4243, "reason": "ECC errors on GPU 3"}
// The sender's pid is taken from the kernel (SCM_CREDENTIALS), not from the message: the agent
// acts only on notices from its own running workers. Anything malformed is dropped (logged,
// rate-limited); a worker never waits for the agent (datagrams, non-blocking).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "common/result.h"

namespace ddprun::agent {

inline constexpr char kWorkerSocketEnv[] = "DDPRUN_WORKER_SOCKET";
inline constexpr std::size_t kMaxNoticeBytes = 8192;

struct WorkerNotice {
  enum class Kind {
    kException,    // the worker's script raised; `message` names the exception
    kStopJob,      // the rank asks to end the job without a restart; `message` is its reason
    kExcludeNode,  // the rank asks to take its node out of the job; `message` is its reason
  };
  Kind kind = Kind::kException;
  pid_t pid = -1;  // the sender, as the kernel says
  // kException: "<Type>: <text>"; kStopJob, kExcludeNode: the rank's reason (never empty: "no
  // reason given" when it gave none). At most 2,000 characters kept.
  std::string message;
  int local_rank = -1;  // as the notice says (for naming only; -1 when it says none)
};

// One datagram from `sender` as a notice; an error naming what is wrong. Pure.
Result<WorkerNotice> parse_worker_notice(std::string_view datagram, pid_t sender);

// What the agent uses (AgentParts): the real socket below, a fake in the lifecycle tests.
// Not thread-safe: the agent's loop.
class WorkerChannel {
 public:
  using Handler = std::function<void(const WorkerNotice&)>;
  virtual ~WorkerChannel() = default;
  // Where notices go from now on (nullptr: dropped).
  virtual void set_handler(Handler handler) = 0;
  // Added to every worker's environment ({DDPRUN_WORKER_SOCKET, path}); empty without a socket.
  virtual std::vector<std::pair<std::string, std::string>> worker_env() const = 0;
};

// The socket, read on the agent's loop. Its directory is removed with it.
class UnixWorkerChannel final : public WorkerChannel {
 public:
  // Makes a private directory under $TMPDIR (else /tmp), binds the socket and starts reading.
  static Result<std::unique_ptr<UnixWorkerChannel>> open(boost::asio::io_context& io);
  ~UnixWorkerChannel() override;

  void set_handler(Handler handler) override;
  std::vector<std::pair<std::string, std::string>> worker_env() const override;

 private:
  struct Impl;
  explicit UnixWorkerChannel(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  // shared with the pending read, which holds it weakly
};

// No socket: workers get no variable and nothing is ever delivered (a channel that could not be
// opened; the job goes on, each failure known at the worker's exit as before).
class NoWorkerChannel final : public WorkerChannel {
 public:
  void set_handler(Handler) override {}
  std::vector<std::pair<std::string, std::string>> worker_env() const override { return {}; }
};

}  // namespace ddprun::agent
