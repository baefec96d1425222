// All jobs a server hosts, isolated by job id: each has its own RoundState, deadline timer and
// the links from its nodes to their current connections.
//
// The registry is the only place that turns RoundState decisions into frames: it answers the
// request that caused them first, then pushes every decision to the node's connection, and
// keeps both in the node's DeliveryLog until the node acknowledges them, so that a node that
// resumes after a cut gets what the cut lost and a request it sends again is not done twice.
// With a state
// store (restore()), each change of a job is recorded (DecisionJournal) before that reply and
// those pushes go out.
//
// Thread-safety: none. Everything runs on the server's io_context (its single owner).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/clock.h"
#include "rendezvous/server/decision_journal.h"
#include "rendezvous/server/delivery_log.h"
#include "rendezvous/server/excluded_hosts.h"
#include "rendezvous/server/round_state.h"
#include "rendezvous/server/server_counters.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

// A connection the registry can send to; implemented by the server's Session.
class Peer {
 public:
  virtual ~Peer() = default;
  virtual void send(const ServerMessage& message) = 0;
  // Closes the connection after sending `why` (a newer connection of the same node took over).
  virtual void kick(const std::string& why) = 0;
  // For status: the peer's address ("ip:port"), and when it last sent a frame (nullopt when
  // unknown).
  virtual std::string address() const { return {}; }
  virtual std::optional<SteadyTime> last_heard() const { return std::nullopt; }
};

class JobRegistry {
 public:
  // One job. Fields are the registry's; sessions only hold a reference while connected.
  struct Job {
    explicit Job(const boost::asio::any_io_executor& ex, std::string job_id)
        : id(std::move(job_id)), timer(ex) {}
    struct Link {
      Peer* peer = nullptr;       // the node's current connection; null while disconnected
      uint64_t token = 0;         // proves a reconnect is the same node
      uint32_t join_request = 0;  // the join that made it a member (kept in the state store)
      DeliveryLog delivery;       // pushes not yet acknowledged, answers to recent requests
      // The node's latest progress report, for the round it was sent in.
      std::vector<RankProgressEntry> progress;
      uint64_t progress_round = 0;
      SteadyTime progress_at{};
      // The node's standby rendezvous server (JoinMsg::standby_port on its master_addr); port
      // 0: none.
      std::string standby_host;
      uint16_t standby_port = 0;
    };
    const std::string id;
    std::optional<RoundState> round;  // created by the first join (it fixes the options)
    size_t connections = 0;           // open connections that said Hello for this job
    std::unordered_map<std::string, Link> links;  // node id → link
    boost::asio::steady_timer timer;              // fires at round->next_deadline()
    std::optional<SteadyTime> timer_at;
    std::optional<uint64_t> last_assigned_round;  // to count each closed round once
    // The straggler threshold the job's nodes last asked for (ProgressMsg); 0: none.
    uint32_t straggler_threshold_milli = 0;
    // The stragglers as told to every node (publish_stragglers), for `stragglers_round`.
    StragglerFinding stragglers;
    uint64_t stragglers_round = 0;
  };

  // A read-only view of one job, for status queries and metrics (not the durable state of
  // job_snapshot.h).
  struct JobView {
    std::string id;
    size_t connections = 0;
    std::optional<RoundState::Snapshot> round;  // none before the first join
    struct LinkView {
      std::string address;                   // empty while disconnected
      std::optional<SteadyTime> last_heard;  // of its current connection
    };
    std::unordered_map<std::string, LinkView> links;  // node id → its connection
    StragglerFinding stragglers;  // judged now by the threshold its nodes asked for
  };

  // `counters` (may be null) receives the durations of closed rounds.
  JobRegistry(boost::asio::any_io_executor executor, const Clock& clock,
              std::shared_ptr<ServerCounters> counters = nullptr);
  ~JobRegistry();

  // This registry's server is hosted by the agent of node `node_id`: every RoundAssigned names
  // a successor (the standby of the member with the lowest group rank other than that node).
  // Empty (the default, ddp-rendezvous): no successor is named.
  void set_host_node(std::string node_id) { host_node_id_ = std::move(node_id); }
  // How long the host of a node that leaves unfit (LeaveMsg::exclude_reason) is kept out of
  // every job of this registry (excluded_hosts.h). 0: not beyond the job it left. Default 0.
  void set_exclude_cooldown(Millis cooldown) { exclude_cooldown_ = cooldown; }

  // A connection said Hello for `job_id`; the job is created on first use.
  Job& open_connection(const std::string& job_id);
  // A connection ended. `node_id` is the node it carried (empty if none); the node keeps its
  // place for heartbeat_timeout. The job may be erased: `job` is invalid afterwards.
  void close_connection(Job& job, Peer& peer, const std::string& node_id);

  // Requests. Each answers `peer` with a Reply of `request_id` before any push it causes.
  // `node_id` is the connection's node: set by join/resume, cleared by leave.
  void join(Job& job, Peer& peer, const JoinMsg& msg, std::string& node_id);
  void resume(Job& job, Peer& peer, const ResumeMsg& msg, std::string& node_id);
  void leave(Job& job, Peer& peer, const LeaveMsg& msg, std::string& node_id);
  void report_failure(Job& job, Peer& peer, const ReportFailureMsg& msg,
                      const std::string& node_id);
  void report_success(Job& job, Peer& peer, const ReportSuccessMsg& msg,
                      const std::string& node_id);
  // Progress: kept per node for the round it names, answered with the job's stragglers by the
  // threshold it asks for (progress/stragglers.h; empty when it asks none). A query answers
  // with every member's latest progress in the current round, ages brought up to now.
  void progress(Job& job, Peer& peer, const ProgressMsg& msg, const std::string& node_id);
  void query_progress(Job& job, Peer& peer, const ProgressQueryMsg& msg);
  // A heartbeat: the node has received `pushes_received` pushes. Error for a count that was
  // never sent (the connection is then closed).
  Status acknowledge(Job& job, const std::string& node_id, uint64_t pushes_received);

  size_t job_count() const { return jobs_.size(); }
  bool has_job(const std::string& job_id) const { return jobs_.contains(job_id); }
  // Every job as it is now, by job id.
  std::vector<JobView> views() const;
  // The stragglers among the ranks of `job`'s current round, by `threshold_milli`.
  static StragglerFinding stragglers_of(const Job& job, uint32_t threshold_milli);
  const Clock& clock() const { return clock_; }
  // Cancels every job timer (server shutdown).
  void cancel_timers();

  // Hosts kept out now (by host name), and releasing one (`ddp-rendezvous release`): true when
  // it was kept out. The release is saved to the state store, if any, without waiting.
  std::vector<ExcludedHost> excluded_hosts();
  bool release_host(const std::string& host);

  // Loads every job and every excluded host (expired ones dropped) `store` holds (each node then
  // has its heartbeat_timeout to resume; see job_snapshot.h) and records every later change there.
  // Call once, before serving. Errors name the store and the job whose state cannot be read;
  // nothing is loaded then.
  Status restore(state::StateStore& store, DecisionJournal::FailureHandler on_failure);
  // Stops recording (server shutdown; see DecisionJournal::detach).
  void stop_recording() { journal_.detach(); }

 private:
  // Records the job's new state, then (once durable) answers `reply_to` (if still the
  // connection of `reply_node`) with `reply`, pushes `decisions` and prunes links if asked.
  void commit(Job& job, Peer* reply_to, const std::string& reply_node, std::optional<Reply> reply,
              Decisions decisions, bool prune_links);
  // A request the node sent again after a cut: answers it as before (after any state change
  // still being recorded) and returns true; false when it was never answered.
  bool answer_again(Job& job, Peer& peer, const std::string& node_id, uint32_t request_id);
  // A join sent again by a node whose first join's answer a cut lost (it has no token to
  // resume with): this connection takes the node over and gets the answer and every push.
  void rejoin_after_lost_reply(Job& job, Peer& peer, Job::Link& link, const Reply& answer,
                               const JoinMsg& msg, std::string& node_id);
  // `peer` becomes the node's connection; an older one is closed.
  void take_over(Job::Link& link, Peer& peer, const std::string& node_id);
  // What changed in the job since the last call: its record and the nodes that changed.
  state::JobChange changes(Job& job);
  DecisionJournal::StateSource state_of(const std::string& job_id);
  void dispatch(Job& job, const Decisions& decisions);
  void name_successor(const Job& job, Decisions& decisions) const;
  void after_change(Job& job, bool prune_links);
  void schedule(Job& job);
  void on_timer(const std::string& job_id);
  void erase_if_idle(Job& job);
  // job_registry_exclusion.cc: a Join from a host kept out is refused (true: answered).
  bool refuse_excluded(Peer& peer, const JoinMsg& msg);
  // Keeps the host of `node_id`, which left `job` unfit, out for the cool-down.
  void exclude_host(const Job& job, const std::string& node_id, const std::string& reason);
  // Saves (nullopt: removes) one host's record in the store, if any; a failure is logged.
  void save_host(const std::string& host, std::optional<std::string> record);
  Status restore_excluded_hosts(state::StateStore& store);
  static Reply error_reply(uint32_t request_id, std::string message);

  boost::asio::any_io_executor executor_;
  const Clock& clock_;
  std::shared_ptr<ServerCounters> counters_;
  std::unordered_map<std::string, std::unique_ptr<Job>> jobs_;
  std::mt19937_64 token_rng_;
  std::string host_node_id_;  // set_host_node; empty: no successors
  Millis exclude_cooldown_{0};
  ExcludedHosts excluded_;
  state::StateStore* host_store_ = nullptr;  // restore()'s store: excluded hosts are saved there
  DecisionJournal journal_;                  // last member: its completions refer to the registry
};

}  // namespace ddprun::rdzv
