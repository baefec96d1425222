// Where a rendezvous cluster keeps its things in etcd (README.md, "etcd key layout"):
//   /ddprun/<cluster>/jobs/<job id>   one job's state (opaque bytes)
//   /ddprun/<cluster>/leader          the leading replica's advertised address, on its lease
//   /ddprun/<cluster>/excluded/<host> a host kept out after a node left unfit (opaque bytes)
// Several clusters (or test runs) share one etcd by using different names.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace ddprun::rdzv::state {

class EtcdKeys {
 public:
  explicit EtcdKeys(std::string cluster) : root_("/ddprun/" + std::move(cluster) + "/") {}
  std::string jobs_prefix() const { return root_ + "jobs/"; }
  std::string job(const std::string& job_id) const { return jobs_prefix() + job_id; }
  std::string leader() const { return root_ + "leader"; }
  std::string excluded_prefix() const { return root_ + "excluded/"; }
  std::string excluded_host(const std::string& host) const { return excluded_prefix() + host; }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

// What a save needs to know to write only while this replica leads: the leader key and the
// create revision it had when this replica won it. A new leader's key has another create
// revision, so a deposed leader's fenced writes fail instead of overwriting the new one's.
struct LeaderFence {
  std::string leader_key;
  int64_t create_revision = 0;
};

}  // namespace ddprun::rdzv::state
