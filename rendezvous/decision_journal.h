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
// Thread-safety: none; the server's io_context thread, like the registry that owns it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

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

  // Records `state` for `job_id` (nullopt: forget the job) and runs `deliver` once it is
  // durable; at once when not recording. `deliver` may be empty.
  void record(const std::string& job_id, std::optional<std::string> state,
              std::function<void()> deliver);

 private:
  state::StateStore* store_ = nullptr;
  FailureHandler on_failure_;
  bool failed_ = false;
  // Shared with the completions in flight: false once destroyed or detached.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ddprun::rdzv
