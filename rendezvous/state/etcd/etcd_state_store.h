// The StateStore that replicas share: one etcd key per job under /ddprun/<cluster>/jobs/,
// holding the job's record and all its node records (etcd_records.h). A save is one put (or
// delete), or, once fenced, one transaction that writes only if this replica still holds the
// leader key it won (LeaderFence), so a deposed leader cannot overwrite the state of its
// successor. Durable when etcd answers: a quorum of members has it in its fsynced raft log.
//
// Why one key, when a save only changes some nodes: a round's close changes every node, and
// one etcd transaction holds at most 128 operations and 1.5 MiB by default (--max-txn-ops,
// --max-request-bytes); nodes under keys of their own would need several transactions, and a
// replica killed between them would leave a job half written. So the store keeps every job it
// wrote or loaded in memory, applies each change there and writes the whole job: O(job) per
// save, and a job's size is bounded by max_state_bytes (about 5,000 nodes at 1 MiB).
//
// Excluded hosts (server/excluded_hosts.h) are one key per host under
// /ddprun/<cluster>/excluded/, written (and fenced) like jobs.
//
// Saves of one job (or host) are sent one at a time (the next waits for the answer to the
// previous), so they reach etcd in order even when a request fails over to another member; saves
// made while one is in flight are merged into one write of the newest state.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rendezvous/state/etcd/etcd_client.h"
#include "rendezvous/state/etcd/etcd_keys.h"
#include "rendezvous/state/state_store.h"

namespace ddprun::rdzv::state {

struct EtcdStateStoreOptions {
  // Keys live under /ddprun/<cluster>/. Default "default".
  std::string cluster = "default";
  // A state larger than this is refused before it is sent (etcd's request limit is 1.5 MiB by
  // default, --max-request-bytes). Default 1 MiB.
  size_t max_state_bytes = 1u << 20;
  // load_all reads this many keys per request. Default 1000.
  int64_t load_page_size = 1000;
};

// Threading: the StateStore contract (the client's io_context thread). Destroying the store
// drops the completions of saves in flight (the writes themselves may still happen).
class EtcdStateStore final : public StateStore {
 public:
  EtcdStateStore(std::shared_ptr<EtcdClient> client, EtcdStateStoreOptions options);
  ~EtcdStateStore() override;

  // Reads every job at one revision, page by page, on a private io_context with its own client
  // (the owner's io_context is not run from here). Blocks for at most pages × members ×
  // request_timeout.
  Result<std::map<std::string, StoredJob>> load_all() override;
  void save(std::string job_id, JobChange change, std::function<void(Status)> done) override;
  using StateStore::save;
  Result<std::map<std::string, std::string>> load_excluded_hosts() override;
  void save_excluded_host(std::string host, std::optional<std::string> record,
                          std::function<void(Status)> done) override;
  std::string describe() const override;

  // From now on, saves write only while `fence.leader_key` still has `fence.create_revision`;
  // otherwise they fail with kRefused ("no longer leads"). nullopt: unfenced.
  void set_fence(std::optional<LeaderFence> fence) { fence_ = std::move(fence); }
  const EtcdKeys& keys() const { return keys_; }

 private:
  // One key's writes (a job's, or an excluded host's): at most one in flight; the newest value
  // waiting behind it.
  struct KeyQueue {
    bool in_flight = false;
    std::vector<std::function<void(Status)>> sent;  // completions of the write in flight
    bool has_next = false;
    std::optional<std::string> next;
    std::vector<std::function<void(Status)>> next_done;
  };
  // Every key under `prefix` at one revision, page by page (see load_all).
  Result<std::vector<etcd::KeyValue>> load_prefix(const std::string& prefix);
  // Writes `value` (nullopt: deletes) at `key` after the writes queued there before.
  void write(const std::string& key, std::optional<std::string> value,
             std::function<void(Status)> done);
  void send(const std::string& key);
  void finish(const std::string& key, const Status& result);

  std::shared_ptr<EtcdClient> client_;
  const EtcdStateStoreOptions options_;
  const EtcdKeys keys_;
  std::optional<LeaderFence> fence_;
  std::unordered_map<std::string, KeyQueue> queues_;  // keys with a write in flight
  std::map<std::string, StoredJob> jobs_;             // every job as loaded and changed since
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once destroyed
};

}  // namespace ddprun::rdzv::state
