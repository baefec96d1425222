#include "rendezvous/state/etcd/etcd_client.h"

#include <exception>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace ddprun::rdzv::state {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;

// Our coroutines do not throw by design; should one (bad_alloc), it is logged, not lost.
void log_end(const std::exception_ptr& error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    spdlog::error("etcd client: a request ended with an exception: {}", e.what());
  }
}

}  // namespace

// One attempt on one member: an answer (any HTTP status) or a transport failure.
struct EtcdClient::Answer {
  Status transport;  // not ok: no answer (refused, reset, timed out)
  unsigned status = 0;
  std::string body;
};

EtcdClient::EtcdClient(asio::io_context& io, EtcdClientOptions options)
    : io_(io), options_(std::move(options)) {
  assert(!options_.endpoints.empty() && "EtcdClient needs at least one endpoint");
}

void EtcdClient::call(const std::string& path, const json& body, Callback<json> done) {
  auto self = shared_from_this();
  asio::co_spawn(
      io_,
      [self, path = std::string(path), body = body.dump(),
       done = std::move(done)]() mutable -> asio::awaitable<void> {
        done(co_await self->call_members(std::move(path), std::move(body)));
      },
      log_end);
}

asio::awaitable<Result<json>> EtcdClient::call_members(std::string path, std::string body) {
  const size_t n = options_.endpoints.size();
  const size_t first = preferred_;
  std::vector<std::string> failures;
  for (size_t i = 0; i < n; ++i) {
    const size_t member = (first + i) % n;
    Answer answer = co_await attempt(member, path, body);
    if (!answer.transport) {
      failures.push_back(
          fmt::format("{}: {}", options_.endpoints[member], answer.transport.message()));
      continue;
    }
    if (answer.status == 200) {
      json parsed = json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded()) {
        co_return Status::malformed(fmt::format("etcd member {} answered {} with bad JSON: {}",
                                                options_.endpoints[member], path,
                                                answer.body.substr(0, 200)));
      }
      preferred_ = member;
      co_return parsed;
    }
    Status error = etcd::parse_error(answer.status, answer.body);
    if (error.is_unavailable()) {  // this member cannot serve now (no leader, stopping, ...)
      failures.push_back(fmt::format("{}: {}", options_.endpoints[member], error.message()));
      continue;
    }
    preferred_ = member;
    co_return error.with_context(fmt::format("etcd {} at {}", path, options_.endpoints[member]));
  }
  co_return Status::unavailable(
      fmt::format("no etcd member answered {} ({})", path, fmt::join(failures, "; ")));
}

// Resolve, connect, write, read within request_timeout: one timer closes the socket (and
// cancels the resolver) when the time is up, which aborts whatever is pending.
asio::awaitable<EtcdClient::Answer> EtcdClient::attempt(size_t member, const std::string& path,
                                                        const std::string& body) {
  auto where = parse_host_port(options_.endpoints[member], kEtcdDefaultPort);
  if (!where) co_return Answer{where.status(), 0, {}};
  const std::string& host = where->host;
  const uint16_t port = where->port;
  // The timer's handler may already be queued when the attempt ends, so what it touches is
  // shared with it rather than living on this coroutine's frame.
  struct Io {
    explicit Io(const asio::any_io_executor& ex) : resolver(ex), socket(ex), timer(ex) {}
    tcp::resolver resolver;
    tcp::socket socket;
    asio::steady_timer timer;
    bool timed_out = false;
  };
  auto io = std::make_shared<Io>(co_await asio::this_coro::executor);
  io->timer.expires_after(options_.request_timeout);
  io->timer.async_wait([io](const boost::system::error_code& ec) {
    if (ec) return;
    io->timed_out = true;
    io->resolver.cancel();
    boost::system::error_code ignored;
    io->socket.close(ignored);
  });
  auto fail = [&](const char* step, const boost::system::error_code& ec) {
    io->timer.cancel();
    return Answer{Status::unavailable(io->timed_out ? fmt::format("{} timed out after {} ms", step,
                                                                  options_.request_timeout.count())
                                                    : fmt::format("{}: {}", step, ec.message())),
                  0,
                  {}};
  };
  boost::system::error_code ec;
  auto endpoints = co_await io->resolver.async_resolve(
      host, std::to_string(port), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return fail("resolve", ec);
  co_await asio::async_connect(io->socket, endpoints,
                               asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return fail("connect", ec);
  http::request<http::string_body> request{http::verb::post, path, 11};
  request.set(http::field::host, options_.endpoints[member]);
  request.set(http::field::content_type, "application/json");
  request.keep_alive(false);
  request.body() = body;
  request.prepare_payload();
  co_await http::async_write(io->socket, request, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return fail("send", ec);
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(options_.max_response_bytes);
  co_await http::async_read(io->socket, buffer, parser,
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return fail("answer", ec);
  io->timer.cancel();
  auto response = parser.release();
  co_return Answer{Status(), response.result_int(), std::move(response.body())};
}

template <class T, class Parse>
void EtcdClient::call_parsed(const std::string& path, const json& body, Parse parse,
                             Callback<T> done) {
  call(path, body, [parse, done = std::move(done)](Result<json> answer) {
    if (!answer) return done(answer.status());
    done(parse(*answer));
  });
}

void EtcdClient::range(const etcd::RangeRequest& request, Callback<etcd::RangeResponse> done) {
  call_parsed<etcd::RangeResponse>("/v3/kv/range", etcd::to_json(request), etcd::parse_range,
                                   std::move(done));
}

void EtcdClient::put(const etcd::PutRequest& request, Callback<etcd::PutResponse> done) {
  call_parsed<etcd::PutResponse>("/v3/kv/put", etcd::to_json(request), etcd::parse_put,
                                 std::move(done));
}

void EtcdClient::delete_range(const etcd::DeleteRangeRequest& request,
                              Callback<etcd::DeleteRangeResponse> done) {
  call_parsed<etcd::DeleteRangeResponse>("/v3/kv/deleterange", etcd::to_json(request),
                                         etcd::parse_delete_range, std::move(done));
}

void EtcdClient::txn(const etcd::TxnRequest& request, Callback<etcd::TxnResponse> done) {
  call_parsed<etcd::TxnResponse>("/v3/kv/txn", etcd::to_json(request), etcd::parse_txn,
                                 std::move(done));
}

void EtcdClient::lease_grant(int64_t ttl_seconds, Callback<etcd::LeaseGrantResponse> done) {
  call_parsed<etcd::LeaseGrantResponse>("/v3/lease/grant",
                                        json{{"TTL", std::to_string(ttl_seconds)}},
                                        etcd::parse_lease_grant, std::move(done));
}

void EtcdClient::lease_keepalive(int64_t lease_id, Callback<int64_t> done) {
  call_parsed<int64_t>("/v3/lease/keepalive", json{{"ID", std::to_string(lease_id)}},
                       etcd::parse_lease_keepalive, std::move(done));
}

void EtcdClient::lease_revoke(int64_t lease_id, std::function<void(Status)> done) {
  call("/v3/lease/revoke", json{{"ID", std::to_string(lease_id)}},
       [done = std::move(done)](const Result<json>& answer) {
         if (!answer && answer.status().is_not_found()) return done(Status());
         done(answer.status());
       });
}

}  // namespace ddprun::rdzv::state
