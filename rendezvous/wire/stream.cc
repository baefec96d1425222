#include "rendezvous/wire/stream.h"

#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace ddprun::rdzv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Stream::Stream(tcp::socket socket) : plain_(std::move(socket)) {}

Stream::Stream(tcp::socket socket, const TlsContext& tls) : tls_(tls->wrap(std::move(socket))) {}

Stream::Stream(Stream&&) noexcept = default;
Stream& Stream::operator=(Stream&&) noexcept = default;
Stream::~Stream() = default;

tcp::socket& Stream::tcp() { return tls_ ? tls_->tcp() : *plain_; }

asio::awaitable<Status> Stream::handshake(Role role, const std::string& server_name) {
  if (!tls_) co_return Status();
  // Named, not temporaries in the co_await: GCC 12 destroys those twice.
  const auto tls_role =
      role == Role::kClient ? TlsTransport::Role::kClient : TlsTransport::Role::kServer;
  const std::string name = role == Role::kClient ? server_name : std::string();
  co_return co_await tls_->handshake(tls_role, name);
}

asio::awaitable<void> Stream::read(asio::mutable_buffer buffer, boost::system::error_code& ec) {
  if (tls_) {
    co_await tls_->read(buffer, ec);
  } else {
    co_await asio::async_read(*plain_, buffer, asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<size_t> Stream::read_some(asio::mutable_buffer buffer,
                                          boost::system::error_code& ec) {
  if (tls_) {
    co_return co_await tls_->read_some(buffer, ec);
  }
  co_return co_await plain_->async_read_some(buffer, asio::redirect_error(asio::use_awaitable, ec));
}

asio::awaitable<void> Stream::write(const std::vector<asio::const_buffer>& buffers,
                                    boost::system::error_code& ec) {
  if (tls_) {
    co_await tls_->write(buffers, ec);
  } else {
    co_await asio::async_write(*plain_, buffers, asio::redirect_error(asio::use_awaitable, ec));
  }
}

void Stream::shutdown_send() {
  boost::system::error_code ignored;
  tcp().shutdown(tcp::socket::shutdown_send, ignored);
}

void Stream::close() {
  boost::system::error_code ignored;
  tcp().shutdown(tcp::socket::shutdown_both, ignored);
  tcp().close(ignored);
}

}  // namespace ddprun::rdzv
