// The seam between ddprun and OpenSSL. Everything that needs libcrypto or libssl (random
// nonces, HMAC, TLS) lives in a module, libddprun_security.so (security/openssl/), loaded the
// first time a token or TLS is configured. Linked into every ddprun, libcrypto and libssl cost
// about 1.7 MB of RSS (their own relocations, before any use) in the many runs that use
// neither; loaded on demand they cost nothing there.
//
// The module is looked for relative to the running program (<prefix>/<libdir>/ddprun/ from
// <prefix>/bin/, as `cmake --install`, the Debian package and the wheel put it), then where
// this configuration installs it and where the build put it; DDPRUN_SECURITY_MODULE names
// another file.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>  // before Boost 1.74's awaitable.hpp (see frame_io.h)
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/result.h"
#include "rendezvous/security/tls_files.h"

namespace ddprun::rdzv {

// One TLS connection over a TCP socket (the module's Boost.Asio SSL stream).
class TlsTransport {
 public:
  enum class Role { kClient, kServer };
  virtual ~TlsTransport() = default;
  virtual boost::asio::ip::tcp::socket& tcp() = 0;
  // A client checks that the server's certificate carries `server_name` ("" = no check).
  // kRefused when TLS itself refused (a certificate, a version, an alert), with OpenSSL's
  // reason and, for a certificate, why it did not verify.
  virtual boost::asio::awaitable<Status> handshake(Role role, const std::string& server_name) = 0;
  virtual boost::asio::awaitable<void> read(boost::asio::mutable_buffer buffer,
                                            boost::system::error_code& ec) = 0;
  virtual boost::asio::awaitable<size_t> read_some(boost::asio::mutable_buffer buffer,
                                                   boost::system::error_code& ec) = 0;
  virtual boost::asio::awaitable<void> write(const std::vector<boost::asio::const_buffer>& buffers,
                                             boost::system::error_code& ec) = 0;
  // Whether `ec` (from read or write) is TLS refusing something rather than the connection
  // ending: a verification failure or an alert from the peer.
  virtual bool is_tls_error(const boost::system::error_code& ec) const = 0;
};

// TLS settings built once from files; makes a transport per connection.
class TlsConfig {
 public:
  virtual ~TlsConfig() = default;
  virtual std::unique_ptr<TlsTransport> wrap(boost::asio::ip::tcp::socket socket) const = 0;
};
using TlsContext = std::shared_ptr<const TlsConfig>;

class SecurityProvider {
 public:
  static constexpr size_t kMacBytes = 32;
  virtual ~SecurityProvider() = default;
  // From OpenSSL's CSPRNG; an error only when it cannot be seeded.
  virtual Status random_bytes(std::span<uint8_t> out) const = 0;
  virtual std::array<uint8_t, kMacBytes> hmac_sha256(std::span<const uint8_t> key,
                                                     std::string_view message) const = 0;
  // Same size and bytes, in time independent of where they differ.
  virtual bool equal_constant_time(std::string_view a, std::string_view b) const = 0;
  // Errors name the file and OpenSSL's reason (tls_files.h has what each side needs).
  virtual Result<TlsContext> make_server_tls(const TlsServerFiles& files) const = 0;
  virtual Result<TlsContext> make_client_tls(const TlsClientFiles& files) const = 0;
};

// Loads the module on first call (thread-safe); every later call gives the same answer. The
// error names the paths tried and dlopen's reason.
Result<const SecurityProvider*> security_provider();

}  // namespace ddprun::rdzv

// The module's one export.
extern "C" const ddprun::rdzv::SecurityProvider* ddprun_security_provider_v1();
