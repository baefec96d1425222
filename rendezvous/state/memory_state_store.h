// An in-memory StateStore for unit tests of the server: nothing survives the process, but
// every completion is posted like a real store's (never inline), and failures can be injected.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "rendezvous/state/state_store.h"

namespace ddprun::rdzv::state {

// Thread-safety: none (the StateStore contract: the owner's io_context thread only).
class MemoryStateStore final : public StateStore {
 public:
  explicit MemoryStateStore(boost::asio::io_context& io) : io_(io) {}

  Result<std::map<std::string, StoredJob>> load_all() override;
  // Applies the save at once (a later load_all() sees it) and posts `done`. With an injected
  // failure, nothing is applied and `done` gets the failure.
  void save(std::string job_id, JobChange change, std::function<void(Status)> done) override;
  using StateStore::save;
  Result<std::map<std::string, std::string>> load_excluded_hosts() override;
  void save_excluded_host(std::string host, std::optional<std::string> record,
                          std::function<void(Status)> done) override;
  std::string describe() const override { return "memory:"; }

  // Test hooks. Every save (and load_all) fails with `error` until cleared with an ok Status.
  void fail_with(Status error) { failure_ = std::move(error); }
  size_t save_count() const { return save_count_; }  // saves applied so far
  const std::map<std::string, StoredJob>& contents() const { return jobs_; }
  const std::map<std::string, std::string>& excluded_hosts() const { return hosts_; }

 private:
  boost::asio::io_context& io_;
  std::map<std::string, StoredJob> jobs_;
  std::map<std::string, std::string> hosts_;  // excluded host → record
  Status failure_;
  size_t save_count_ = 0;
};

}  // namespace ddprun::rdzv::state
