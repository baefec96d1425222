// The job's key-value data with c10d TCPStore semantics: values, counters, compare-and-set,
// appends, queues, waits and watches, bounded by StoreLimits.
//
// Pure: no I/O, no clock. Waits have no server-side timeout (c10d clients time out on their
// side and cancel, or hang up). A client (one connection) is a `StoreEngine::Client`: the
// engine calls it back when its pending wait is satisfied or a key it watches changes. Those
// calls happen inside the mutating call (set, add, ...), after the engine's state is
// consistent; a callback must not call back into the engine (a connection only queues bytes).
//
// Thread-safety: none; owned by the server's io_context thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/result.h"
#include "store/messages.h"

namespace ddprun::store {

// Bounds on what one store holds. A write that would cross one is refused (kRefused) and
// counted; nothing is changed by a refused write.
struct StoreLimits {
  // Most keys (plain keys and non-empty queues together). Default 1 Mi.
  size_t max_keys = 1u << 20;
  // Most bytes of keys, values and queued items together. Default 512 MiB.
  size_t max_total_bytes = 512u << 20;
};

class StoreEngine {
 public:
  // One client of the store. Each has at most one pending wait (a c10d client waits
  // synchronously) and any number of watched keys.
  class Client {
   public:
    // Its pending wait is satisfied (the wait has ended).
    virtual void wait_done() = 0;
    // A key it watches changed.
    virtual void key_changed(const WatchEvent& event) = 0;

   protected:
    ~Client() = default;
  };

  explicit StoreEngine(StoreLimits limits = {}) : limits_(limits) {}
  StoreEngine(const StoreEngine&) = delete;
  StoreEngine& operator=(const StoreEngine&) = delete;

  // Stores `value`; wakes waiters on `key`, tells its watchers (kCreated / kUpdated).
  Status set(const std::string& key, std::string value);
  // c10d semantics: a missing key with an empty `expected` is created with `desired`; a
  // missing key with a non-empty `expected` stays missing and `expected` is returned; an
  // existing key equal to `expected` takes `desired`. Returns the value the key holds after
  // (or `expected`, in the missing case).
  Result<std::string> compare_set(const std::string& key, const std::string& expected,
                                  std::string desired);
  // The value, or nullopt when the key does not exist.
  std::optional<std::string> get(const std::string& key) const;
  // Adds `delta` to the decimal integer stored at `key` (a missing key counts as 0), stores and
  // returns the sum. Errors: the value is not an integer (kInvalidArgument), the sum overflows
  // (kInvalidArgument), limits (kRefused).
  Result<int64_t> add(const std::string& key, int64_t delta);
  // Appends `value` to the key's value (creating it); watchers see kCreated / kAppended.
  Status append(const std::string& key, const std::string& value);
  // Removes the key; returns whether it existed. Watchers see kDeleted.
  bool erase(const std::string& key);
  // Number of plain keys (queues are not counted, as in c10d).
  int64_t num_keys() const { return static_cast<int64_t>(data_.size()); }
  // Every plain key, in no particular order (c10d 2.x's LIST_KEYS; queues are not listed).
  std::vector<std::string> list_keys() const;
  // Sets every pair in order; the limits are checked for the whole request first.
  Status multi_set(const std::vector<std::string>& keys, std::vector<std::string> values);

  // True when every key exists (a plain key, or a queue holding an item).
  bool check(const std::vector<std::string>& keys) const;
  // Starts `client`'s wait for `keys` (ending any wait it still had, see cancel_wait). Returns
  // true when every key exists already (no wait is left pending); otherwise the wait stays
  // pending until each missing key has been written once, then `client.wait_done()` is called.
  bool wait(Client& client, const std::vector<std::string>& keys);
  // c10d 2.x's barrier: adds 1 to the counter at `key` (as add) and returns true when the sum
  // has reached `world_size`. Otherwise `client`'s wait stays pending (it replaces any wait the
  // client had, and cancel_wait ends it) until a later write brings the counter to
  // `world_size`; then `client.wait_done()` is called. The counter is never decremented: a
  // barrier that timed out on the client's side still counts it, as in c10d.
  Result<bool> barrier(Client& client, const std::string& key, int64_t world_size);
  // Ends `client`'s pending wait (a wait or a barrier) without calling it; false when it had
  // none.
  bool cancel_wait(Client& client);
  bool has_pending_wait(const Client& client) const;

  // `client` hears every later change of `key` (registering twice is the same as once).
  void watch(Client& client, const std::string& key);

  // Appends an item to the queue `key` and completes at most one wait on it (c10d 2.x).
  Status queue_push(const std::string& key, std::string value);
  struct Popped {
    int64_t length_before = 0;
    std::optional<std::string> value;  // the front item; nullopt when the queue was empty
  };
  Popped queue_pop(const std::string& key);
  int64_t queue_len(const std::string& key) const;

  // The client is gone: its wait is cancelled and its watches dropped. Must be called before a
  // Client is destroyed.
  void forget(Client& client);

  // Figures for statistics.
  size_t keys() const { return data_.size() + queues_.size(); }
  size_t bytes() const { return bytes_; }
  size_t queued_items() const { return queued_items_; }
  size_t pending_waits() const { return waits_.size(); }
  size_t watches() const;
  uint64_t refusals() const { return refusals_; }

 private:
  struct PendingWait {
    size_t missing = 0;             // keys not yet written since the wait began
    std::vector<std::string> keys;  // the keys it was registered on (for cancelling)
    // A barrier: waits for its one key's counter to reach this value, not for a write.
    std::optional<int64_t> barrier_target;
  };

  bool exists(const std::string& key) const;
  Status admit(size_t new_keys, size_t added_bytes);
  // Stores and notifies; the caller has admitted the change.
  void store(const std::string& key, std::string value);
  // Removes `client` from each key's waiter list that still holds it.
  void unregister_wait(Client* client, const PendingWait& wait);
  // A key was written: every wait on it counts it, every barrier on it compares its counter;
  // those complete are called back.
  void key_written(const std::string& key);
  // Whether the counter at `key` has reached `target` (a value that is no integer has not).
  bool counter_reached(const std::string& key, int64_t target) const;
  void notify(const WatchEvent& event);

  const StoreLimits limits_;
  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<std::string, std::deque<std::string>> queues_;  // never holds empty ones
  size_t bytes_ = 0;                                                 // keys + values + items
  size_t queued_items_ = 0;
  uint64_t refusals_ = 0;

  std::unordered_map<Client*, PendingWait> waits_;
  std::unordered_map<std::string, std::vector<Client*>> waiting_on_;  // key → waits, in order
  std::unordered_map<std::string, std::vector<Client*>> watchers_;    // key → watchers
  std::unordered_map<Client*, std::unordered_set<std::string>> watched_by_;
};

}  // namespace ddprun::store
