#include "rendezvous/status_client.h"

#include <optional>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "rendezvous/frame_io.h"

namespace ddprun::rdzv {
namespace {

asio::awaitable<Result<StatusReport>> exchange(tcp::socket& socket,
                                               const StatusQueryOptions& options) {
  boost::system::error_code ec;
  tcp::resolver resolver(socket.get_executor());
  auto endpoints = co_await resolver.async_resolve(options.host, std::to_string(options.port),
                                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return Status::unavailable("cannot resolve the host: " + ec.message());
  co_await asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return Status::unavailable("cannot connect: " + ec.message());
  configure_socket(socket);
  const std::string query = encode_frame(ClientMessage(StatusQuery{}));
  co_await asio::async_write(socket, asio::buffer(query),
                             asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return Status::unavailable("cannot send the query: " + ec.message());
  std::vector<uint8_t> body;
  Status read = co_await read_frame(socket, options.limits, body);
  if (!read) {
    co_return Status::unavailable("the server closed the connection without a report (" +
                                  read.message() + ")");
  }
  auto message = decode_server_message(body, options.limits);
  if (!message) co_return message.status();
  if (auto* report = std::get_if<StatusReport>(&*message)) co_return std::move(*report);
  if (auto* error = std::get_if<ErrorMsg>(&*message)) {
    co_return Status::refused("the server refused the status query: " + error->message +
                              " (a ddp-rendezvous older than status queries?)");
  }
  co_return Status::malformed("the server answered with an unexpected frame");
}

}  // namespace

Result<StatusReport> query_status(const StatusQueryOptions& options) {
  asio::io_context io;
  tcp::socket socket(io);
  std::optional<Result<StatusReport>> result;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { result.emplace(co_await exchange(socket, options)); },
      [&](std::exception_ptr error) {
        if (error) result = Status::error("the status query ended with an exception");
      });
  io.run_for(options.timeout);
  const std::string where = fmt::format("rendezvous server {}:{}", options.host, options.port);
  if (!result) {
    // The pending steps are dropped with the socket and the io_context.
    return Status::timed_out(
        fmt::format("{}: no status report within {} ms", where, options.timeout.count()));
  }
  if (!*result) return result->status().with_context(where);
  return std::move(*result);
}

}  // namespace ddprun::rdzv
