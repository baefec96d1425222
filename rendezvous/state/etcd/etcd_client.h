// A client for etcd's v3 API through its HTTP/JSON gateway (Debian bookworm ships etcd 3.4
// and no maintained C++ etcd client, and the gateway needs nothing beyond Boost.Beast and
// nlohmann/json). One HTTP/1.1 request per call, asynchronous on the owner's io_context.
//
// Failover: the client knows every member's client URL. A call goes first to the member that
// answered last; when that member refuses the connection, times out, or answers "unavailable"
// (no leader, leader changed, ...), the call moves on to the next member, each tried at most
// once per call. An answer that is an etcd error (lease not found, request too large) is final.
// So a call takes at most `request_timeout` × members, and its error names every member's
// failure. Retrying a write on another member is safe for the calls this folder makes: puts and
// deletes are idempotent, and the leadership transaction checks for its own earlier success.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>  // before Boost 1.74's awaitable.hpp (see rendezvous/wire/frame_io.h)
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/host_port.h"
#include "common/result.h"
#include "rendezvous/state/etcd/etcd_json.h"

namespace ddprun::rdzv::state {

// etcd's client port, for an endpoint written without one.
inline constexpr uint16_t kEtcdDefaultPort = 2379;

struct EtcdClientOptions {
  // Client URLs of the members as "host:port" ("[::1]:2379" for IPv6). At least one. Required.
  std::vector<std::string> endpoints;
  // One attempt on one member (resolve, connect, send, answer) may take at most this.
  // Default 2 s: well above a healthy member's latency (a few ms) and below the default lease
  // TTL (5 s), so that a leader can fail over to another member before its lease runs out.
  Millis request_timeout{2'000};
  // Answers larger than this are refused (a corrupt or hostile peer). Default 64 MiB.
  size_t max_response_bytes = 64u << 20;
};

// Lifetime: create with std::make_shared; every call in flight holds the client. Callbacks run
// on the io_context, exactly once (or never, if the io_context is destroyed first). Owners that
// may die before a callback must guard against it themselves (see EtcdLeadership).
// Thread-safety: none; call from the io_context's thread.
class EtcdClient : public std::enable_shared_from_this<EtcdClient> {
 public:
  template <class T>
  using Callback = std::function<void(Result<T>)>;

  EtcdClient(boost::asio::io_context& io, EtcdClientOptions options);

  void range(const etcd::RangeRequest& request, Callback<etcd::RangeResponse> done);
  void put(const etcd::PutRequest& request, Callback<etcd::PutResponse> done);
  void delete_range(const etcd::DeleteRangeRequest& request,
                    Callback<etcd::DeleteRangeResponse> done);
  void txn(const etcd::TxnRequest& request, Callback<etcd::TxnResponse> done);
  // TTL in whole seconds (etcd's unit; it raises values below its minimum, 2 s by default).
  void lease_grant(int64_t ttl_seconds, Callback<etcd::LeaseGrantResponse> done);
  // The lease's remaining TTL in seconds after the refresh; 0 when the lease is gone.
  void lease_keepalive(int64_t lease_id, Callback<int64_t> done);
  // Revoking a lease that is already gone is not an error.
  void lease_revoke(int64_t lease_id, std::function<void(Status)> done);

  // The member that answered last (the first tried by the next call).
  const std::string& current_endpoint() const { return options_.endpoints[preferred_]; }
  const EtcdClientOptions& options() const { return options_; }
  boost::asio::io_context& io() { return io_; }

  // Runs `path` with `body` on the members as described above; the answer's JSON on HTTP 200.
  // Public for the calls this header does not wrap (e.g. /v3/maintenance/status).
  void call(const std::string& path, const nlohmann::json& body, Callback<nlohmann::json> done);

 private:
  struct Answer;
  boost::asio::awaitable<Result<nlohmann::json>> call_members(std::string path, std::string body);
  boost::asio::awaitable<Answer> attempt(size_t member, const std::string& path,
                                         const std::string& body);
  template <class T, class Parse>
  void call_parsed(const std::string& path, const nlohmann::json& body, Parse parse,
                   Callback<T> done);

  boost::asio::io_context& io_;
  const EtcdClientOptions options_;
  size_t preferred_ = 0;  // index into options_.endpoints: the member that answered last
};

}  // namespace ddprun::rdzv::state
