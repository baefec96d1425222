// Opening a state store by name: the `--state` / `--state-dir` value the daemon is given
// (`ddp-rendezvous`), parsed into a spec and opened as SQLite, etcd or memory. Daemon only: the
// embedded server of an agent keeps its state in memory, so ddprun links none of this.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "common/result.h"
#include "rendezvous/state/state_store.h"

namespace ddprun::rdzv::state {

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
