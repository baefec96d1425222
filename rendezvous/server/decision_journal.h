// The one place where the rendezvous server makes its decisions durable: each job's state is
// recorded in a StateStore (rendezvous/state) before the replies and pushes that announce the
// change reach any client, so a daemon that dies and restarts never contradicts what a client
// was told. Without a store (the default, and an agent's embedded server) deliveries run at
// once, exactly as before.
//
// Order: deliveries run in the order they were recorded (the StateStore's completion order).
// A failed save stops the journal for good: nothing it was holding, nor anything later, is
// delivered, and the owner is told once (the daemon exits; agents reconnect to its successor).
//
// Group commit: a job has at most one save in flight. Decisions recorded meanwhile wait
// together for the next save, which writes what changed in the job since the save before
// (the caller's source gives that change only when the save starts, so one write covers them
// all). So the writes of a burst of N decisions (N nodes joining one round) follow the
// store's speed, not N, and each writes only the nodes that changed: a round costs O(N).
//
// Thread-safety: none; the server's io_context thread, like the registry that owns it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "rendezvous/state/state_store.h"

namespace ddprun::rdzv {

class DecisionJournal {
 public:
  using FailureHandler = std::function<void(const Status& why)>;

  DecisionJournal() = default;
  ~DecisionJournal() { *alive_ = false; }
  DecisionJournal(const DecisionJournal&) = delete;
  DecisionJournal& operator=(const DecisionJournal&) = delete;

  // Records into `store` (not owned; must outlive the journal or be detached first).
  void attach(state::StateStore* store, FailureHandler on_failure);
  // Stops recording (server shutdown: the connections it closes must not be recorded as lost
  // members, so that a restarted daemon finds the jobs as they were). Later deliveries run at
  // once; those already waiting for the store are dropped.
  void detach();
  bool recording() const { return store_ != nullptr; }

  // What changed in the job since the source was last called (a change without a job record:
  // forget the job). Called once per save, when the save starts.
  using StateSource = std::function<state::JobChange()>;

  // Records `job_id`'s change, as `state` gives it when its save starts (at once, or after the
  // save in flight), and runs `deliver` once that change is durable; at once when not
  // recording. `deliver` may be empty. The latest `state` of a job is the one used.
  void record(const std::string& job_id, StateSource state, std::function<void()> deliver);

  // Saves made so far (tests and benchmarks: how many decisions shared a write).
  uint64_t saves() const { return saves_; }

 private:
  struct JobQueue {
    bool in_flight = false;
    StateSource state;                        // the latest source recorded
    std::vector<std::function<void()>> next;  // deliveries waiting for the next save
  };
  void start_save(const std::string& job_id);
  void saved(const std::string& job_id, const Status& status,
             const std::vector<std::function<void()>>& batch);

  state::StateStore* store_ = nullptr;
  FailureHandler on_failure_;
  bool failed_ = false;
  std::unordered_map<std::string, JobQueue> queues_;  // jobs with a save in flight
  uint64_t saves_ = 0;
  // Shared with the completions in flight: false once destroyed or detached.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ddprun::rdzv
