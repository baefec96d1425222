// The seam through which the rendezvous server makes its decisions outlive the process: a
// map from job id to an opaque state blob (the server's serialisation of one job), recorded
// durably before the server pushes a decision to any client. See README.md in this folder.
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

#include <boost/asio/io_context.hpp>

#include "common/result.h"

namespace ddprun::rdzv::state {

// Contract shared by every implementation:
//  - Ownership: the caller owns the store; it is built on (and bound to) one io_context, the
//    owner's, which must be run by one thread. Destroying the store cancels nothing that was
//    already durable; see each implementation for what happens to saves still in flight.
//  - Threading: call every method from the io_context's thread (or before it runs). Not
//    thread-safe.
//  - Completions: `done` of save() always runs later on the io_context (posted, never inline
//    inside save()), exactly once, unless the store or the io_context is destroyed first.
//  - Order: the saves of one job complete in the order they were made, and a later save of a
//    job is never overwritten by an earlier one. A save that a later save of the same job
//    supersedes before it reached the medium may complete together with that later save: its
//    content is covered by the later state (states are whole, not deltas).
//  - Durability: done(ok) means the state is on the medium the store promises (an fsynced
//    SQLite WAL, a quorum of etcd members); done(error) means it may or may not be there (the
//    server must then not push the decision, and should treat the store as failed).
class StateStore {
 public:
  virtual ~StateStore() = default;

  // Everything stored, job id -> state bytes. Blocks the calling thread (disk reads; for etcd
  // one or more bounded HTTP requests). Call at start, or when this replica takes over.
  virtual Result<std::map<std::string, std::string>> load_all() = 0;

  // Durably records `state` for `job_id`, or forgets the job when `state` is nullopt (a
  // forgotten job that is not stored is not an error). Does not block.
  virtual void save(std::string job_id, std::optional<std::string> state,
                    std::function<void(Status)> done) = 0;

  // Where the state lives, for logs: "memory:", "sqlite:/var/lib/ddprun/rendezvous.db",
  // "etcd://127.0.0.1:2379,... (cluster default)".
  virtual std::string describe() const = 0;
};

// A parsed `--state` / `--state-dir` value.
struct StateSpec {
  enum class Kind { kMemory, kSqlite, kEtcd };
  Kind kind = Kind::kMemory;
  std::string directory;               // kSqlite: the state directory
  std::vector<std::string> endpoints;  // kEtcd: "host:port" client URLs, in the given order
  std::string cluster = "default";     // kEtcd: keys live under /ddprun/<cluster>/
};

// Accepts "memory:", "sqlite:DIR", a plain directory ("DIR", "/var/lib/ddprun"),
// "etcd://h1:2379,h2:2379" and "etcd://h1:2379,h2:2379/<cluster>" (port defaults to 2379,
// IPv6 as "[::1]:2379"). Errors name the spec and the part that is wrong.
Result<StateSpec> parse_state_spec(const std::string& spec);

// Opens the store a spec names (SQLite: creates the directory and database if needed, checks
// and migrates it; etcd: checks nothing yet, the first request does). Blocks on disk I/O.
// For HA with etcd, build EtcdClient, EtcdStateStore and EtcdLeadership yourself so that the
// store can be fenced by the leadership (etcd_state_store.h); this factory's etcd store is
// unfenced.
Result<std::unique_ptr<StateStore>> open_state_store(boost::asio::io_context& io,
                                                     const std::string& spec);
Result<std::unique_ptr<StateStore>> open_state_store(boost::asio::io_context& io,
                                                     const StateSpec& spec);

}  // namespace ddprun::rdzv::state
