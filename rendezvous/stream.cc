#include "rendezvous/stream.h"

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace ddprun::rdzv {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;

Stream::Stream(tcp::socket socket) : plain_(std::move(socket)) {}

Stream::Stream(tcp::socket socket, TlsContext tls)
    : context_(std::move(tls)),
      tls_(std::make_unique<ssl::stream<tcp::socket>>(std::move(socket), *context_)) {}

Stream::Stream(Stream&&) noexcept = default;
Stream& Stream::operator=(Stream&&) noexcept = default;
Stream::~Stream() = default;

tcp::socket& Stream::tcp() { return tls_ ? tls_->next_layer() : *plain_; }

asio::awaitable<Status> Stream::handshake(Role role, const std::string& server_name) {
  if (!tls_) co_return Status();
  SSL* ssl_handle = tls_->native_handle();
  if (role == Role::kClient && !server_name.empty()) {
    name_mismatch_ = false;
    tls_->set_verify_callback([this, check = ssl::host_name_verification(server_name)](
                                  bool preverified, ssl::verify_context& ctx) mutable {
      const bool ok = check(preverified, ctx);
      // The chain verified but this certificate does not carry the name: say so.
      if (preverified && !ok) name_mismatch_ = true;
      return ok;
    });
    boost::system::error_code not_ip;
    asio::ip::make_address(server_name, not_ip);
    // SNI carries host names only, never addresses (RFC 6066).
    if (not_ip) SSL_set_tlsext_host_name(ssl_handle, server_name.c_str());
  }
  boost::system::error_code ec;
  co_await tls_->async_handshake(
      role == Role::kClient ? ssl::stream_base::client : ssl::stream_base::server,
      asio::redirect_error(asio::use_awaitable, ec));
  if (!ec) co_return Status();
  std::string why = ec.message();
  const long verify = SSL_get_verify_result(ssl_handle);
  if (name_mismatch_) {
    why += fmt::format(" (the server's certificate is not for '{}')", server_name);
  } else if (verify != X509_V_OK) {
    why += fmt::format(" ({})", X509_verify_cert_error_string(verify));
  }
  const bool refused = ec.category() == asio::error::get_ssl_category();
  co_return Status::error(refused ? ErrorKind::kRefused : ErrorKind::kClosed,
                          "TLS handshake: " + why);
}

asio::awaitable<void> Stream::read(asio::mutable_buffer buffer, boost::system::error_code& ec) {
  if (tls_) {
    co_await asio::async_read(*tls_, buffer, asio::redirect_error(asio::use_awaitable, ec));
  } else {
    co_await asio::async_read(*plain_, buffer, asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<size_t> Stream::read_some(asio::mutable_buffer buffer,
                                          boost::system::error_code& ec) {
  if (tls_) {
    co_return co_await tls_->async_read_some(buffer, asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return co_await plain_->async_read_some(buffer, asio::redirect_error(asio::use_awaitable, ec));
}

asio::awaitable<void> Stream::write(const std::vector<asio::const_buffer>& buffers,
                                    boost::system::error_code& ec) {
  if (tls_ && buffers.size() > 1) {
    // An SSL stream writes one buffer per record: a batch of small frames goes as one.
    batch_.clear();
    for (const auto& b : buffers) batch_.append(static_cast<const char*>(b.data()), b.size());
    co_await asio::async_write(*tls_, asio::buffer(batch_),
                               asio::redirect_error(asio::use_awaitable, ec));
  } else if (tls_) {
    co_await asio::async_write(*tls_, buffers, asio::redirect_error(asio::use_awaitable, ec));
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
