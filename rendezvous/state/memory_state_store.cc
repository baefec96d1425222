#include "rendezvous/state/memory_state_store.h"

#include <utility>

#include <boost/asio/post.hpp>

namespace ddprun::rdzv::state {

Result<std::map<std::string, StoredJob>> MemoryStateStore::load_all() {
  if (!failure_) return failure_;
  return jobs_;
}

void MemoryStateStore::save(std::string job_id, JobChange change,
                            std::function<void(Status)> done) {
  Status result = failure_;
  if (result) {
    apply_change(jobs_, job_id, std::move(change));
    ++save_count_;
  }
  // Posted, never inline: the server must not rely on a completion re-entering it.
  boost::asio::post(io_, [done = std::move(done), result = std::move(result)] { done(result); });
}

Result<std::map<std::string, std::string>> MemoryStateStore::load_excluded_hosts() {
  if (!failure_) return failure_;
  return hosts_;
}

void MemoryStateStore::save_excluded_host(std::string host, std::optional<std::string> record,
                                          std::function<void(Status)> done) {
  Status result = failure_;
  if (result) {
    if (record) {
      hosts_[host] = std::move(*record);
    } else {
      hosts_.erase(host);
    }
  }
  boost::asio::post(io_, [done = std::move(done), result = std::move(result)] { done(result); });
}

}  // namespace ddprun::rdzv::state
