#include "rendezvous/server/decision_journal.h"

#include <spdlog/spdlog.h>

namespace ddprun::rdzv {

void DecisionJournal::attach(state::StateStore* store, FailureHandler on_failure) {
  store_ = store;
  on_failure_ = std::move(on_failure);
}

void DecisionJournal::detach() {
  store_ = nullptr;
  *alive_ = false;
  alive_ = std::make_shared<bool>(true);
  queues_.clear();
}

void DecisionJournal::record(const std::string& job_id, StateSource state,
                             std::function<void()> deliver) {
  if (!store_) {
    if (deliver) deliver();
    return;
  }
  if (failed_) return;  // nothing more reaches a client once a decision could not be recorded
  JobQueue& queue = queues_[job_id];
  queue.state = std::move(state);
  if (deliver) queue.next.push_back(std::move(deliver));
  if (!queue.in_flight) start_save(job_id);
}

void DecisionJournal::start_save(const std::string& job_id) {
  JobQueue& queue = queues_[job_id];
  queue.in_flight = true;
  std::vector<std::function<void()>> batch = std::move(queue.next);
  queue.next.clear();
  ++saves_;
  store_->save(job_id, queue.state ? queue.state() : state::JobChange{},
               [this, alive = alive_, job_id, batch = std::move(batch)](const Status& s) {
                 if (!*alive) return;
                 saved(job_id, s, batch);
               });
}

void DecisionJournal::saved(const std::string& job_id, const Status& status,
                            const std::vector<std::function<void()>>& batch) {
  if (failed_) return;
  if (!status) {
    failed_ = true;
    queues_.clear();
    spdlog::critical(
        "cannot record the state of job '{}' in {}: {}; no decision is sent that is not "
        "recorded",
        job_id, store_ ? store_->describe() : "the state store", status.message());
    if (on_failure_) on_failure_(status);
    return;
  }
  spdlog::debug("recorded job '{}' ({} decision(s))", job_id, batch.size());
  // Still in flight while the batch is delivered: what a delivery records joins the next save.
  for (auto& deliver : batch) {
    deliver();
    if (failed_ || !store_) return;
  }
  auto it = queues_.find(job_id);
  if (it == queues_.end()) return;
  if (it->second.next.empty()) {
    queues_.erase(it);  // nothing waits: the next record saves at once
    return;
  }
  start_save(job_id);
}

}  // namespace ddprun::rdzv
