// The client library of the rendezvous server: what an agent (or a tool) links to take part in
// a job's rendezvous and to use its key-value store.
//
// Threading and callbacks: the client lives on the io_context it is given, which one thread
// runs (the agent's). Call every method on that thread. Nothing blocks; every result comes
// back through a callback invoked on that thread, never inline from the call that started it.
// An exception thrown by a callback is caught and logged, never propagated. After close()
// completes, or once the RendezvousClient is destroyed, no callback runs any more.
//
// Agent lifecycle:
//   RendezvousClient client(io, client_options);
//   client.set_event_handler(on_event);           // RestartRequested / JobFailed / ...
//   client.connect([&](Status s) {                // deadline + backoff + jitter
//     client.join(request, [&](Result<RoundAssignment> a) { start workers from *a });
//   });
//   on worker failure:   client.report_worker_failure(report_json, exit_code);
//                        → every member (this one too) gets RestartRequested{worker_failure}
//                          and calls join() again, or JobFailed when restarts are exhausted.
//   on RestartRequested: stop workers, join() again (scale-up and member loss count no restart).
//   on worker success:   client.report_success();  → JobSucceeded once every member succeeded.
//   at the end:          client.close(done);        // a clean leave
//
// Connection loss: heartbeats go every keep_alive_interval; a server silent for
// heartbeat_timeout counts as lost. The client then reconnects (same backoff) and resumes its
// membership within heartbeat_timeout, which the server also grants; requests in flight at the
// loss fail with an error, pushes made meanwhile are delivered after the resume. If that does
// not succeed, the handler gets ConnectionLost and a pending join fails: treat it as fatal.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "rendezvous/codec.h"
#include "rendezvous/messages.h"
#include "rendezvous/rdzv_conf.h"

namespace ddprun::rdzv {

struct ClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 29400;
  // The job (torchrun's --rdzv_id): the rendezvous and the KV namespace of this client.
  std::string job_id;
  // Source address to bind ("" = any); tests give each node its own 127.0.0.N.
  std::string local_address;
  // The first connect() gives up after this. Default 600 s (join_timeout).
  Millis connect_timeout{600'000};
  // One connection attempt (connect + handshake). Default 10 s.
  Millis attempt_timeout{10'000};
  // Backoff between attempts: doubles from initial to max, scaled by ±jitter.
  Millis initial_backoff{100};
  Millis max_backoff{3'000};
  double jitter = 0.5;
  // Heartbeat period. Default 5 s (torchrun's keep_alive_interval).
  Millis keep_alive_interval{5'000};
  // A server silent this long is lost; also the window to reconnect and keep membership.
  // Default 15 s (keep_alive_interval × keep_alive_max_attempt).
  Millis heartbeat_timeout{15'000};
  // A request the server has not answered within this fails with an error naming it, even
  // while the connection stays alive (a stuck server still answering heartbeats). kv_wait
  // gets its own timeout on top. Default 60 s (torchrun's read_timeout).
  Millis request_timeout{60'000};
  CodecLimits limits;

  // Timeouts from --rdzv_conf: connect_timeout = join_timeout, attempt_timeout =
  // min(read_timeout, 10 s), request_timeout = read_timeout, keep_alive_interval,
  // heartbeat_timeout.
  static ClientOptions from_conf(const RendezvousConf& conf, std::string host, uint16_t port,
                                 std::string job_id);
};

// What a node asks for. The options (nodes, restarts, timeouts) must agree across the job;
// the first node to join fixes them and a node that disagrees gets an error.
struct JoinRequest {
  std::string node_id;  // unique within the job, e.g. "<hostname>:<pid>"
  uint32_t local_world_size = 1;
  std::optional<uint32_t> node_rank_hint;  // honoured when valid and free
  std::string master_addr;  // MASTER_ADDR/PORT this node offers if it becomes group rank 0
  uint16_t master_port = 0;
  uint32_t min_nodes = 1;
  uint32_t max_nodes = 1;
  uint32_t max_restarts = 0;  // job-wide worker-failure restarts
  Millis join_timeout{600'000};
  Millis last_call_timeout{30'000};
  Millis heartbeat_timeout{15'000};  // the server keeps a disconnected node this long
  Millis exit_barrier_timeout{300'000};
};

// The outcome of a round for this node (see messages.h): round, group_rank,
// group_world_size (nodes), local_world_size, rank_offset (first global rank of this node),
// world_size (all workers), master_addr/port, restart_count (job-wide, for
// TORCHELASTIC_RESTART_COUNT), max_restarts and job_id (TORCHELASTIC_RUN_ID).
using RoundAssignment = RoundAssigned;

// The server could not be reached again within heartbeat_timeout: the job is lost to us.
struct ConnectionLost {
  std::string message;
};
// Pushed events. RestartRequested: stop workers, join() the next round. JobFailed: stop
// workers, print `report` (the job's first failure report, identical on every node) and exit
// with `exit_code`. JobSucceeded: every member reported success; exit 0.
using RendezvousEvent = std::variant<RestartRequested, JobFailed, JobSucceeded, ConnectionLost>;

class RendezvousClient {
 public:
  RendezvousClient(boost::asio::io_context& io, ClientOptions options);
  // Drops the connection without a Leave (the server keeps the node for heartbeat_timeout);
  // no callback runs afterwards. Prefer close().
  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  // Events of the job; set before join(). Replaces any previous handler.
  void set_event_handler(std::function<void(const RendezvousEvent&)> handler);

  // Connects with deadline, backoff and jitter and does the handshake.
  void connect(std::function<void(Status)> done);

  // Joins the next round. Completes with the assignment when the round closes, or an error
  // (job finished, options that disagree, too few nodes before join_timeout — then the
  // handler also gets JobFailed with the exit code). One join at a time.
  void join(JoinRequest request, std::function<void(Result<RoundAssignment>)> done);

  // This node's workers failed in the current round. `report` is opaque (the agent's JSON).
  void report_worker_failure(std::string report, int32_t exit_code,
                             std::function<void(Status)> done = {});
  // This node's workers all succeeded: enter the exit barrier (JobSucceeded when all have).
  void report_success(std::function<void(Status)> done = {});

  // Key-value store of the job (kJob) or of its current round (kRound, emptied each round).
  void kv_set(KvScope scope, std::string key, std::string value, std::function<void(Status)> done);
  void kv_get(KvScope scope, std::string key,
              std::function<void(Result<std::optional<std::string>>)> done);
  void kv_add(KvScope scope, std::string key, int64_t delta,
              std::function<void(Result<int64_t>)> done);
  // Stores `desired` if the value equals `expected` (absent = ""); yields the value after.
  void kv_compare_set(KvScope scope, std::string key, std::string expected, std::string desired,
                      std::function<void(Result<std::string>)> done);
  // Completes when every key exists, or with an error after `timeout`.
  void kv_wait(KvScope scope, std::vector<std::string> keys, Millis timeout,
               std::function<void(Status)> done);
  void kv_delete(KvScope scope, std::string key, std::function<void(Result<bool>)> done);
  void kv_num_keys(KvScope scope, std::function<void(Result<int64_t>)> done);

  // Leaves the job cleanly (others see a membership change unless the job is over), then
  // disconnects. `done` runs once the server acknowledged or after attempt_timeout.
  void close(std::function<void()> done = {});

  bool connected() const;
  // The last assignment received, if any.
  const std::optional<RoundAssignment>& assignment() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace ddprun::rdzv
