#include "rendezvous/daemon/status_client.h"

#include <optional>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "rendezvous/client/client_handshake.h"
#include "rendezvous/wire/frame_io.h"
#include "rendezvous/wire/server_address.h"

namespace ddprun::rdzv {
namespace {

// After a timeout, how long the cancelled exchange may take to unwind (it ends at once, except
// in a host name resolution, which cannot be cancelled and is then dropped with the io_context).
constexpr Millis kUnwind{1000};

// One server asked once. `stream` is the caller's, so that it is closed before the io_context
// goes. A Redirect comes back in `*redirect`.
asio::awaitable<Result<StatusReport>> exchange(asio::any_io_executor ex,
                                               std::optional<Stream>& stream,
                                               const StatusQueryOptions& options,
                                               std::optional<Redirect>* redirect) {
  boost::system::error_code ec;
  tcp::resolver resolver(ex);
  const std::string port = std::to_string(options.port);
  auto endpoints = co_await resolver.async_resolve(options.host, port,
                                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return Status::unavailable("cannot resolve the host: " + ec.message());
  tcp::socket socket(ex);
  co_await asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return Status::unavailable("cannot connect: " + ec.message());
  configure_socket(socket);
  const ClientCredentials& credentials = options.credentials;
  if (credentials.tls) {
    stream.emplace(std::move(socket), credentials.tls);
  } else {
    stream.emplace(std::move(socket));
  }
  const std::string server_name =
      credentials.tls_server_name.empty() ? options.host : credentials.tls_server_name;
  auto report = co_await client_status_query(*stream, credentials, server_name, options.limits,
                                             redirect, options.release_host);
  if (!report && report.status().is_closed()) {
    co_return Status::unavailable("the server closed the connection without a report (" +
                                  report.status().message() + ")");
  }
  co_return report;
}

// Asks one server within `timeout`; a Redirect comes back in `*redirect`.
Result<StatusReport> ask(const StatusQueryOptions& options, Millis timeout,
                         std::optional<Redirect>* redirect) {
  asio::io_context io;
  std::optional<Stream> stream;
  std::optional<Result<StatusReport>> result;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        result.emplace(co_await exchange(io.get_executor(), stream, options, redirect));
      },
      [&](const std::exception_ptr& error) {
        if (error) result = Status::error("the status query ended with an exception");
      });
  io.run_for(timeout);
  const bool timed_out = !result.has_value();
  if (timed_out && stream) {
    // Let the exchange unwind while the stream exists: a TLS stream's pending operations refer
    // to it until they complete. Closing completes them at once.
    stream->close();
    io.restart();
    io.run_for(kUnwind);
  }
  const std::string where = fmt::format("rendezvous server {}:{}", options.host, options.port);
  if (timed_out) {
    return Status::timed_out(
        fmt::format("{}: no status report within {} ms", where, options.timeout.count()));
  }
  if (!*result) return result->status().with_context(where);
  return std::move(*result);
}

}  // namespace

Result<StatusAnswer> query_status(const StatusQueryOptions& options) {
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  StatusQueryOptions here = options;
  for (int hop = 0;; ++hop) {
    const auto left =
        std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    std::optional<Redirect> redirect;
    auto report = ask(here, std::max(left, Millis(1)), &redirect);
    if (report) {
      return StatusAnswer{std::move(*report), to_string(ServerAddress{here.host, here.port})};
    }
    // A replica that does not lead names the leader (none while an election is under way:
    // that error says so and is the answer).
    if (!redirect || redirect->host.empty()) return report.status();
    if (hop == kMaxStatusRedirects) {
      return Status::malformed(fmt::format("{}; gave up after {} redirects", report.error_message(),
                                           kMaxStatusRedirects));
    }
    here.host = redirect->host;
    here.port = redirect->port;
  }
}

}  // namespace ddprun::rdzv
