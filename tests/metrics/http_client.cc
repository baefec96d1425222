#include "tests/metrics/http_client.h"

#include <utility>  // before Boost 1.74's awaitable.hpp

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace ddprun::testing {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// Runs the asynchronous steps started on `io` until they finish or `timeout` passes, then
// closes the socket so nothing is left pending.
bool run_bounded(asio::io_context& io, tcp::socket& socket, std::chrono::milliseconds timeout,
                 const bool& done) {
  io.run_for(timeout);
  if (done) return true;
  boost::system::error_code ignored;
  socket.close(ignored);
  io.restart();
  io.run();  // the cancelled handlers
  return false;
}

Result<tcp::endpoint> endpoint_of(const std::string& host, uint16_t port) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) return Status::invalid_argument("not an IP address: " + host);
  return tcp::endpoint(address, port);
}

}  // namespace

Result<HttpReply> http_get(const std::string& host, uint16_t port, const std::string& target,
                           std::chrono::milliseconds timeout) {
  auto endpoint = endpoint_of(host, port);
  if (!endpoint) return endpoint.status();
  asio::io_context io;
  tcp::socket socket(io);
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, host);
  request.set(http::field::connection, "close");
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  boost::system::error_code error;
  bool done = false;
  socket.async_connect(*endpoint, [&](boost::system::error_code ec) {
    if (ec) {
      error = ec, done = true;
      return;
    }
    http::async_write(socket, request, [&](boost::system::error_code ec, std::size_t) {
      if (ec) {
        error = ec, done = true;
        return;
      }
      http::async_read(socket, buffer, response,
                       [&](boost::system::error_code ec, std::size_t) { error = ec, done = true; });
    });
  });
  if (!run_bounded(io, socket, timeout, done)) {
    return Status::timed_out("GET " + target + ": no whole reply in time");
  }
  if (error) return Status::unavailable("GET " + target + ": " + error.message());
  HttpReply reply;
  reply.status = static_cast<int>(response.result_int());
  reply.content_type = std::string(response[http::field::content_type]);
  reply.allow = std::string(response[http::field::allow]);
  reply.body = std::move(response.body());
  return reply;
}

Result<std::string> raw_exchange(const std::string& host, uint16_t port, const std::string& request,
                                 std::chrono::milliseconds timeout) {
  auto endpoint = endpoint_of(host, port);
  if (!endpoint) return endpoint.status();
  asio::io_context io;
  tcp::socket socket(io);
  std::string reply;
  boost::system::error_code error;
  bool done = false;
  socket.async_connect(*endpoint, [&](boost::system::error_code ec) {
    if (ec) {
      error = ec, done = true;
      return;
    }
    asio::async_write(
        socket, asio::buffer(request), [&](boost::system::error_code ec, std::size_t) {
          // A server may close before reading everything (a request that is too large): what it
          // sent before closing is still there to read.
          asio::async_read(socket, asio::dynamic_buffer(reply),
                           [&](boost::system::error_code ec, std::size_t) {
                             if (ec != asio::error::eof && ec != asio::error::connection_reset) {
                               error = ec;
                             }
                             done = true;
                           });
        });
  });
  if (!run_bounded(io, socket, timeout, done)) {
    return Status::timed_out("the server did not close the connection in time; read so far: " +
                             reply);
  }
  if (error) return Status::unavailable(error.message());
  return reply;
}

int status_of(const std::string& raw_reply) {
  if (raw_reply.rfind("HTTP/1.", 0) != 0 || raw_reply.size() < 12) return 0;
  return std::atoi(raw_reply.substr(9, 3).c_str());
}

}  // namespace ddprun::testing
