// The seam through which the rendezvous server makes its decisions outlive the process: per
// job id, the job's own record and one record per node (opaque bytes: the server's
// serialisation), recorded durably before the server pushes a decision to any client. A save
// carries what changed (the job's record and the nodes that changed), so a round of N joins
// writes O(N) bytes, not O(N) per join. See README.md in this folder.
//
// Implementations: MemoryStateStore (unit tests), SqliteStateStore (`--state-dir DIR`, the
// embedded default) and EtcdStateStore (`--state etcd://...`, shared by replicas).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace ddprun::rdzv::state {

// One job as stored: its own record and its nodes' records by node id.
struct StoredJob {
  std::string job;
  std::map<std::string, std::string> nodes;
  bool operator==(const StoredJob&) const = default;
};

// What one save changes in one job. `job` nullopt: the job is forgotten with all its nodes
// (`nodes` is then ignored). Otherwise the job's record becomes `job`, and each node in
// `nodes` gets its new record, or is removed when it maps to nullopt; nodes not named keep
// theirs.
struct JobChange {
  std::optional<std::string> job;
  std::map<std::string, std::optional<std::string>> nodes;
};

// Applies `change` to `jobs` (an in-memory copy of what a store holds).
void apply_change(std::map<std::string, StoredJob>& jobs, const std::string& job_id,
                  JobChange change);

// Contract shared by every implementation:
//  - Ownership: the caller owns the store; it is built on (and bound to) one io_context, the
//    owner's, which must be run by one thread. Destroying the store cancels nothing that was
//    already durable; see each implementation for what happens to saves still in flight.
//  - Threading: call every method from the io_context's thread (or before it runs). Not
//    thread-safe.
//  - Completions: `done` of save() always runs later on the io_context (posted, never inline
//    inside save()), exactly once, unless the store or the io_context is destroyed first.
//  - Order: the saves of one job are applied and complete in the order they were made; each
//    applies on top of the ones before (changes, not whole states). Saves may reach the medium
//    together (one transaction, one etcd write) and then complete together.
//  - Durability: done(ok) means the state is on the medium the store promises (an fsynced
//    SQLite WAL, a quorum of etcd members); done(error) means it may or may not be there (the
//    server must then not push the decision, and should treat the store as failed).
class StateStore {
 public:
  virtual ~StateStore() = default;

  // Everything stored, by job id. Blocks the calling thread (disk reads; for etcd one or more
  // bounded HTTP requests). Call at start, or when this replica takes over.
  virtual Result<std::map<std::string, StoredJob>> load_all() = 0;

  // Durably applies `change` to `job_id` (forgetting a job that is not stored is not an
  // error). Does not block.
  virtual void save(std::string job_id, JobChange change, std::function<void(Status)> done) = 0;
  // A change of the job's record alone (nullopt: forget the job).
  void save(std::string job_id, std::optional<std::string> job_record,
            std::function<void(Status)> done) {
    save(std::move(job_id), JobChange{std::move(job_record), {}}, std::move(done));
  }

  // Hosts kept out of the server's jobs after a node left unfit (server/excluded_hosts.h):
  // one opaque record per host, apart from the jobs. Everything stored, by host; blocks like
  // load_all().
  virtual Result<std::map<std::string, std::string>> load_excluded_hosts() = 0;
  // Durably sets (`record`) or removes (nullopt; removing a host not stored is not an error)
  // one host's record. The contract of save(): posted completion, the saves of one host in
  // order, done(ok) once on the medium. Does not block.
  virtual void save_excluded_host(std::string host, std::optional<std::string> record,
                                  std::function<void(Status)> done) = 0;

  // Where the state lives, for logs: "memory:", "sqlite:/var/lib/ddprun/rendezvous.db",
  // "etcd://127.0.0.1:2379,... (cluster default)".
  virtual std::string describe() const = 0;
};

}  // namespace ddprun::rdzv::state
