// The byte stream under one rendezvous connection: plain TCP, or TLS over TCP, decided per
// server or client at run time (security/tls_context.h). Frames (frame_io, frame_writer) are
// read and written through it, so the protocol above does not know which it is.
//
// Not thread-safe: one reader and one writer coroutine on one io_context thread, as Asio's
// SSL stream allows.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>  // before Boost 1.74's awaitable.hpp (see frame_io.h)
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/result.h"
#include "rendezvous/security/provider.h"

namespace ddprun::rdzv {

class Stream {
 public:
  enum class Role { kClient, kServer };

  // Plain TCP.
  explicit Stream(boost::asio::ip::tcp::socket socket);
  // TLS over `socket` (the OpenSSL module's transport); handshake() must succeed before
  // anything else is read or written.
  Stream(boost::asio::ip::tcp::socket socket, const TlsContext& tls);
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  ~Stream();

  bool is_tls() const { return tls_ != nullptr; }
  // The TCP socket underneath: endpoints, options, cancellation by close().
  boost::asio::ip::tcp::socket& tcp();

  // The TLS handshake (nothing for plain TCP). A client checks that the server's certificate
  // carries `server_name`. Errors say what failed: "certificate verify failed (unable to get
  // local issuer certificate)", "peer did not return a certificate", ...
  boost::asio::awaitable<Status> handshake(Role role, const std::string& server_name = {});

  // Exactly buffer_size(buffer) bytes, or an error (eof when the peer hung up first).
  boost::asio::awaitable<void> read(boost::asio::mutable_buffer buffer,
                                    boost::system::error_code& ec);
  boost::asio::awaitable<size_t> read_some(boost::asio::mutable_buffer buffer,
                                           boost::system::error_code& ec);
  boost::asio::awaitable<void> write(const std::vector<boost::asio::const_buffer>& buffers,
                                     boost::system::error_code& ec);
  // Whether `ec` from a read or write is TLS refusing something (an alert, a record that does
  // not verify) rather than the connection ending.
  bool is_tls_error(const boost::system::error_code& ec) const {
    return tls_ && tls_->is_tls_error(ec);
  }

  // Half-close: the peer reads what was written, then end of stream. (TLS: no close_notify;
  // the frame protocol says when a conversation ends, so a truncation attack gains nothing.)
  void shutdown_send();
  // Closes the socket; a pending read or write completes with operation_aborted.
  void close();

 private:
  std::optional<boost::asio::ip::tcp::socket> plain_;
  std::unique_ptr<TlsTransport> tls_;
};

}  // namespace ddprun::rdzv
