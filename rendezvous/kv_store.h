// The c10d-like key-value store of one job: set / get / add / compare_set / wait / delete /
// num_keys, with a job-wide scope and a round scope that is emptied when a new round opens.
//
// Pure in-memory data with callbacks for waits; timeouts are the caller's business (it calls
// cancel_wait when its timer fires or its client goes away), so the store has no clock.
// Thread-safety: none; owned by the server's io_context.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "rendezvous/messages.h"

namespace ddprun::rdzv {

class KvStore {
 public:
  using WaitId = uint64_t;
  using WaitCallback = std::function<void()>;

  void set(KvScope scope, const std::string& key, std::string value);
  std::optional<std::string> get(KvScope scope, const std::string& key) const;
  // Adds `delta` to the integer stored in decimal at `key` (absent = 0) and returns the sum;
  // an error when the stored value is not an integer.
  Result<int64_t> add(KvScope scope, const std::string& key, int64_t delta);
  // c10d semantics: stores `desired` when the current value equals `expected` (an absent key
  // equals the empty string); returns the value the key holds afterwards.
  std::string compare_set(KvScope scope, const std::string& key, const std::string& expected,
                          std::string desired);
  bool erase(KvScope scope, const std::string& key);
  int64_t num_keys(KvScope scope) const;

  // Calls `done` once every key exists (at once, before returning, if they already do) and
  // returns 0 then; otherwise returns an id for cancel_wait(). `done` runs inside set/add/
  // compare_set, so it must not call back into the store.
  WaitId wait(KvScope scope, const std::vector<std::string>& keys, WaitCallback done);
  // Forgets a pending wait without calling it; unknown ids are ignored.
  void cancel_wait(WaitId id);
  // A new round opened: round-scoped keys vanish (pending waits stay).
  void clear_round();
  size_t pending_waits() const { return waits_.size(); }

 private:
  static std::string full_key(KvScope scope, const std::string& key);
  void on_key_added(const std::string& full);

  struct Wait {
    size_t missing = 0;
    WaitCallback done;
  };
  std::unordered_map<std::string, std::string> data_;        // full key → value
  int64_t counts_[2] = {0, 0};                               // keys per scope
  std::unordered_multimap<std::string, WaitId> waiting_on_;  // full key → waits
  std::map<WaitId, Wait> waits_;
  WaitId next_wait_id_ = 1;
};

}  // namespace ddprun::rdzv
