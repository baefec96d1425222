#include "rendezvous/wire/frame_io.h"

#include <array>

#include <spdlog/spdlog.h>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/posix_fd.h"

namespace ddprun::rdzv {

namespace {
Status read_error(const Stream& stream, const boost::system::error_code& ec,
                  const char* eof_message) {
  if (stream.is_tls_error(ec)) {
    return Status::refused("TLS: " + ec.message());
  }
  return Status::closed(ec == asio::error::eof ? eof_message : ec.message());
}
}  // namespace

asio::awaitable<Status> read_frame(Stream& stream, const CodecLimits& limits,
                                   std::vector<uint8_t>& body) {
  boost::system::error_code ec;
  std::array<uint8_t, kFrameHeaderBytes> header{};
  co_await stream.read(asio::buffer(header), ec);
  if (ec) co_return read_error(stream, ec, "connection closed");
  auto len = decode_frame_length(header, limits);
  if (!len) co_return len.status().with_context("bad frame header");
  body.resize(*len);  // bounded by limits.max_frame_bytes above
  co_await stream.read(asio::buffer(body), ec);
  if (ec) co_return read_error(stream, ec, "connection closed in the middle of a frame");
  co_return Status();
}

void configure_socket(tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  set_cloexec(socket.native_handle());
}

}  // namespace ddprun::rdzv
