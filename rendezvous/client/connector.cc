#include "rendezvous/client/connector.h"

#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "rendezvous/client/client_handshake.h"
#include "rendezvous/client/connect_progress.h"
#include "rendezvous/wire/frame_io.h"

namespace ddprun::rdzv {
namespace {

// Marks a coroutine frame gone when it is destroyed (see attempt()).
struct FrameGuard {
  explicit FrameGuard(std::shared_ptr<bool> flag) : alive(std::move(flag)) {}
  FrameGuard(const FrameGuard&) = delete;
  FrameGuard& operator=(const FrameGuard&) = delete;
  ~FrameGuard() { *alive = false; }
  std::shared_ptr<bool> alive;
};

// Resolve, bind, connect and handshake once, within `budget`. A timer closes the socket (and
// cancels the resolver) when the budget runs out, which aborts whatever is pending.
// `redirect` receives a Redirect the server answered with.
asio::awaitable<Result<Stream>> attempt(asio::any_io_executor ex, const ConnectOptions& o,
                                        const ServerAddress& server, Millis budget, bool& permanent,
                                        bool& refused, std::optional<Redirect>& redirect) {
  tcp::resolver resolver(ex);
  tcp::socket socket(ex);
  asio::steady_timer timer(ex);
  bool timed_out = false;
  std::function<void()> closer = [&socket] {
    boost::system::error_code ignored;
    socket.close(ignored);
  };
  // The timer's handler may already be queued when the frame ends: the budget ran out in the
  // same turn of the loop as the operation it bounds completed, so cancel() comes too late and
  // the handler runs after co_return. It looks at `alive` (false once the frame is gone) before
  // it touches anything of the frame. ASan caught the write to a freed frame in
  // DaemonDurabilityTest (a thousand clients reconnecting to a restarted daemon).
  const auto alive = std::make_shared<bool>(true);
  const FrameGuard guard{alive};
  timer.expires_after(budget);
  timer.async_wait([&, alive](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    timed_out = true;
    resolver.cancel();
    closer();
  });
  auto fail = [&](const std::string& step, const boost::system::error_code& ec) {
    timer.cancel();
    return Status::error(timed_out ? fmt::format("{} timed out after {} ms", step, budget.count())
                                   : fmt::format("{}: {}", step, ec.message()));
  };
  boost::system::error_code ec;
  auto endpoints = co_await resolver.async_resolve(server.host, std::to_string(server.port),
                                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec == asio::error::host_not_found_try_again && !timed_out) {
    // EAI_AGAIN: the resolver did not answer; the next attempt asks again.
    timer.cancel();
    co_return Status::unavailable(
        fmt::format("resolving {}: the resolver did not answer (retrying)", server.host));
  }
  if (ec) co_return fail(fmt::format("resolving {}", server.host), ec);
  std::optional<asio::ip::address> local;
  if (!o.local_address.empty()) {
    local = asio::ip::make_address(o.local_address, ec);
    if (ec) {
      permanent = true;
      co_return fail(fmt::format("source address {}", o.local_address), ec);
    }
  }
  // Each endpoint in turn, by hand: the range form of async_connect reopens the socket per
  // endpoint, which would drop the source-address bind.
  ec = asio::error::host_not_found;
  for (const auto& entry : endpoints) {
    const tcp::endpoint remote = entry.endpoint();
    if (local && local->is_v4() != remote.address().is_v4()) continue;
    boost::system::error_code ignored;
    socket.close(ignored);
    socket.open(remote.protocol(), ec);
    if (!ec && local) socket.bind(tcp::endpoint(*local, 0), ec);
    if (ec) {
      permanent = true;
      co_return fail(fmt::format("bind to {}", o.local_address), ec);
    }
    co_await socket.async_connect(remote, asio::redirect_error(asio::use_awaitable, ec));
    // Nobody listening, a connect from the server's own address can meet itself: the kernel
    // may pick the server's port as the local one, and TCP's simultaneous open connects the
    // socket to itself. It would read its own Hello back and hold the port a restarting
    // server needs: treat it as the refusal it stands for.
    if (!ec && connected_to_itself(socket)) ec = asio::error::connection_refused;
    if (!ec) break;
  }
  if (ec) {
    refused = !timed_out && ec == asio::error::connection_refused;
    co_return fail("connect", ec);
  }
  configure_socket(socket);
  const ClientCredentials none;
  const ClientCredentials& credentials = o.credentials ? *o.credentials : none;
  Stream stream =
      credentials.tls ? Stream(std::move(socket), credentials.tls) : Stream(std::move(socket));
  // The timer closes `socket`, which is now the stream's: point it there.
  closer = [&stream] { stream.close(); };
  const std::string server_name =
      credentials.tls_server_name.empty() ? server.host : credentials.tls_server_name;
  Status shaken =
      co_await client_handshake(stream, o.job_id, credentials, server_name, o.limits, &redirect);
  timer.cancel();
  if (shaken) co_return std::move(stream);
  permanent = shaken.is_refused();
  if (timed_out)
    co_return Status::error(fmt::format("handshake timed out after {} ms", budget.count()));
  co_return shaken;
}

// "3× connect: Connection refused (attempts 1-3); 1× connect timed out ... (attempt 4)".
std::string summarize(const std::vector<std::string>& errors) {
  std::map<std::string, std::pair<size_t, size_t>> seen;  // message → (count, last attempt)
  std::vector<std::string> order;
  for (size_t i = 0; i < errors.size(); ++i) {
    auto [it, inserted] = seen.try_emplace(errors[i], 0, 0);
    if (inserted) order.push_back(errors[i]);
    ++it->second.first;
    it->second.second = i + 1;
  }
  std::vector<std::string> parts;
  parts.reserve(order.size());
  for (const auto& m : order) {
    parts.push_back(fmt::format("{}x {} (last at attempt {})", seen[m].first, m, seen[m].second));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

asio::awaitable<Result<Connection>> connect_with_backoff(asio::any_io_executor ex, ConnectOptions o,
                                                         std::mt19937_64& rng, const Clock& clock,
                                                         std::shared_ptr<const bool> stop) {
  const auto start = clock.steady_now();
  const auto deadline = start + o.deadline;
  const bool several = o.servers.size() > 1;
  ConnectProgress progress(to_string(o.servers), start, deadline);
  std::vector<std::string> errors;
  Millis backoff = o.initial_backoff;
  asio::steady_timer sleep(ex);
  size_t next = 0;                      // the next address of the list to try
  std::optional<ServerAddress> leader;  // named by the last attempt's Redirect
  bool replica_answered = false;        // a Redirect came back in this round through the list
  for (;;) {
    if (stop && *stop) co_return Status::closed("connect cancelled: the client was closed");
    const auto left = std::chrono::duration_cast<Millis>(deadline - clock.steady_now());
    const bool redirected = leader.has_value();
    const ServerAddress server =
        redirected ? *std::exchange(leader, std::nullopt) : o.servers[next++ % o.servers.size()];
    bool permanent = false;
    bool refused = false;
    std::optional<Redirect> redirect;
    auto stream = co_await attempt(ex, o, server, std::clamp(left, Millis(1), o.attempt_timeout),
                                   permanent, refused, redirect);
    if (stream) co_return Connection{std::move(*stream), server};
    replica_answered = replica_answered || redirect.has_value();
    errors.push_back(several || redirected
                         ? fmt::format("{}: {}", to_string(server), stream.error_message())
                         : stream.error_message());
    if (refused && o.stop_when_refused) {
      co_return Status::unavailable(fmt::format(
          "{} refuses connections (nothing listens there any more): the server's process is "
          "gone",
          to_string(server)));
    }
    if (permanent) {
      // Said once, not as an attempt count: retrying a refusal cannot help.
      co_return Status::refused(fmt::format("the rendezvous server at {} refused this node: {}",
                                            to_string(server), stream.error_message()));
    }
    const auto now = clock.steady_now();
    if (auto line = progress.failed(now, errors.back()); line && o.report_waiting) {
      spdlog::warn("{}", *line);
    }
    if (redirect && !redirect->host.empty() && !redirected && now < deadline) {
      leader = ServerAddress{redirect->host, redirect->port};  // at once: no backoff
      continue;
    }
    std::uniform_real_distribution<double> jitter(1.0 - o.jitter, 1.0 + o.jitter);
    const auto wait =
        Millis(static_cast<int64_t>(static_cast<double>(backoff.count()) * jitter(rng)));
    if (now + wait >= deadline) {
      co_return Status::error(
          ErrorKind::kUnavailable,
          fmt::format(
              "could not reach the rendezvous server at {} within {} s ({} attempts): {}",
              to_string(o.servers),
              fmt::format("{:.1f}", static_cast<double>((now - start) / Millis(1)) / 1000.0),
              errors.size(), summarize(errors)));
    }
    sleep.expires_after(wait);
    boost::system::error_code ec;
    co_await sleep.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    // Once per round through the list: every replica gets a prompt try before waits grow.
    // While replicas answer (a leader has just died, or an election is under way), the
    // rendezvous is about to be served again: the waits stay short.
    if (next % o.servers.size() == 0) {
      backoff = std::min(backoff * 2, replica_answered ? o.election_backoff : o.max_backoff);
      replica_answered = false;
    }
  }
}

bool connected_to_itself(const tcp::socket& socket) {
  boost::system::error_code local_ec, remote_ec;
  const auto local = socket.local_endpoint(local_ec);
  const auto remote = socket.remote_endpoint(remote_ec);
  return !local_ec && !remote_ec && local == remote;
}

}  // namespace ddprun::rdzv
