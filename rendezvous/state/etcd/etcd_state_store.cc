#include "rendezvous/state/etcd/etcd_state_store.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "rendezvous/state/etcd/etcd_records.h"

namespace ddprun::rdzv::state {

EtcdStateStore::EtcdStateStore(std::shared_ptr<EtcdClient> client, EtcdStateStoreOptions options)
    : client_(std::move(client)), options_(std::move(options)), keys_(options_.cluster) {}

EtcdStateStore::~EtcdStateStore() { *alive_ = false; }

std::string EtcdStateStore::describe() const {
  return fmt::format("etcd://{} (keys under {})", fmt::join(client_->options().endpoints, ","),
                     keys_.jobs_prefix());
}

Result<std::vector<etcd::KeyValue>> EtcdStateStore::load_prefix(const std::string& prefix) {
  // A private loop and client: load_all may be called from a handler on the owner's loop,
  // which must not be run re-entrantly. The private client starts at the member that answered
  // the shared one last.
  boost::asio::io_context io;
  EtcdClientOptions o = client_->options();
  std::rotate(o.endpoints.begin(),
              std::find(o.endpoints.begin(), o.endpoints.end(), client_->current_endpoint()),
              o.endpoints.end());
  auto client = std::make_shared<EtcdClient>(io, std::move(o));
  etcd::RangeRequest request{prefix, etcd::prefix_range_end(prefix), options_.load_page_size, 0};
  std::vector<etcd::KeyValue> kvs;
  for (;;) {
    std::optional<Result<etcd::RangeResponse>> page;
    client->range(request, [&](Result<etcd::RangeResponse> r) { page = std::move(r); });
    io.run();  // ends when the request has completed: it is the only work
    io.restart();
    if (!page) return Status::error("etcd range ended without an answer");
    if (!*page) return page->status();
    for (auto& kv : (*page)->kvs) kvs.push_back(std::move(kv));
    if (!(*page)->more || (*page)->kvs.empty()) break;
    // The next page at the same revision, from just after the last key.
    request.revision = (*page)->revision;
    request.key = kvs.back().key + '\0';
  }
  return kvs;
}

Result<std::map<std::string, StoredJob>> EtcdStateStore::load_all() {
  const std::string prefix = keys_.jobs_prefix();
  auto kvs = load_prefix(prefix);
  if (!kvs) return kvs.status().with_context("loading the rendezvous state from etcd");
  std::map<std::string, StoredJob> jobs;
  for (auto& kv : *kvs) {
    auto stored = decode_job_records(kv.value);
    if (!stored) return stored.status().with_context(fmt::format("etcd key {}", kv.key));
    jobs[kv.key.substr(prefix.size())] = std::move(*stored);
  }
  jobs_ = jobs;
  return jobs;
}

Result<std::map<std::string, std::string>> EtcdStateStore::load_excluded_hosts() {
  const std::string prefix = keys_.excluded_prefix();
  auto kvs = load_prefix(prefix);
  if (!kvs) return kvs.status().with_context("loading the excluded hosts from etcd");
  std::map<std::string, std::string> hosts;
  for (auto& kv : *kvs) hosts[kv.key.substr(prefix.size())] = std::move(kv.value);
  return hosts;
}

void EtcdStateStore::save_excluded_host(std::string host, std::optional<std::string> record,
                                        std::function<void(Status)> done) {
  write(keys_.excluded_host(host), std::move(record), std::move(done));
}

void EtcdStateStore::save(std::string job_id, JobChange change, std::function<void(Status)> done) {
  apply_change(jobs_, job_id, std::move(change));
  auto job = jobs_.find(job_id);
  std::optional<std::string> state;
  if (job != jobs_.end()) state = encode_job_records(job->second);
  if (state && state->size() > options_.max_state_bytes) {
    Status too_big = Status::refused(fmt::format(
        "the state of job '{}' is {} bytes, more than the {} bytes an etcd state store accepts",
        job_id, state->size(), options_.max_state_bytes));
    boost::asio::post(client_->io(), [done = std::move(done), too_big] { done(too_big); });
    return;
  }
  write(keys_.job(job_id), std::move(state), std::move(done));
}

void EtcdStateStore::write(const std::string& key, std::optional<std::string> value,
                           std::function<void(Status)> done) {
  KeyQueue& q = queues_[key];
  q.has_next = true;
  q.next = std::move(value);
  q.next_done.push_back(std::move(done));
  if (!q.in_flight) send(key);
}

void EtcdStateStore::send(const std::string& key) {
  KeyQueue& q = queues_[key];
  q.in_flight = true;
  q.has_next = false;
  q.sent = std::move(q.next_done);
  q.next_done.clear();
  etcd::RequestOp op = q.next ? etcd::RequestOp(etcd::PutRequest{key, std::move(*q.next), 0})
                              : etcd::RequestOp(etcd::DeleteRangeRequest{key, {}});
  q.next.reset();
  auto on_done = [this, alive = alive_, key](const Status& s) {
    if (*alive) finish(key, s);
  };
  if (!fence_) {
    if (auto* put = std::get_if<etcd::PutRequest>(&op)) {
      client_->put(*put, [on_done](auto r) { on_done(r.status()); });
    } else {
      client_->delete_range(std::get<etcd::DeleteRangeRequest>(op),
                            [on_done](auto r) { on_done(r.status()); });
    }
    return;
  }
  etcd::TxnRequest txn;
  txn.compare.push_back(
      {fence_->leader_key, etcd::Compare::Target::kCreateRevision, fence_->create_revision, {}});
  txn.success.push_back(std::move(op));
  client_->txn(txn, [on_done, fence = *fence_](Result<etcd::TxnResponse> r) {
    if (r && !r->succeeded) {
      return on_done(Status::refused(fmt::format(
          "this replica no longer leads: {} is not the key it created at revision {}; another "
          "replica has taken over",
          fence.leader_key, fence.create_revision)));
    }
    on_done(r.status());
  });
}

void EtcdStateStore::finish(const std::string& key, const Status& result) {
  auto it = queues_.find(key);
  auto sent = std::move(it->second.sent);
  it->second.in_flight = false;
  if (it->second.has_next) {
    send(key);
  } else {
    queues_.erase(it);
  }
  // After the queue is settled: a completion may save again.
  for (auto& done : sent) done(result);
}

}  // namespace ddprun::rdzv::state
