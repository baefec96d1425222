#include "rendezvous/decision_journal.h"

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
}

void DecisionJournal::record(const std::string& job_id, std::optional<std::string> state,
                             std::function<void()> deliver) {
  if (!store_) {
    if (deliver) deliver();
    return;
  }
  if (failed_) return;  // nothing more reaches a client once a decision could not be recorded
  store_->save(job_id, std::move(state),
               [this, alive = alive_, job_id, deliver = std::move(deliver)](const Status& s) {
                 if (!*alive || failed_) return;
                 if (!s) {
                   failed_ = true;
                   spdlog::critical(
                       "cannot record the state of job '{}' in {}: {}; no decision is sent "
                       "that is not recorded",
                       job_id, store_ ? store_->describe() : "the state store", s.message());
                   if (on_failure_) on_failure_(s);
                   return;
                 }
                 spdlog::debug("recorded job '{}'", job_id);
                 if (deliver) deliver();
               });
}

}  // namespace ddprun::rdzv
