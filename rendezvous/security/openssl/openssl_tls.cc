#include "rendezvous/security/openssl/openssl_tls.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <fmt/format.h>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace ddprun::rdzv::openssl {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;

class Transport final : public TlsTransport {
 public:
  Transport(tcp::socket socket, std::shared_ptr<ssl::context> context)
      : context_(std::move(context)), stream_(std::move(socket), *context_) {}

  tcp::socket& tcp() override { return stream_.next_layer(); }

  asio::awaitable<Status> handshake(Role role, const std::string& server_name) override {
    SSL* handle = stream_.native_handle();
    if (role == Role::kClient && !server_name.empty()) {
      stream_.set_verify_callback([this, check = ssl::host_name_verification(server_name)](
                                      bool preverified, ssl::verify_context& ctx) mutable {
        const bool ok = check(preverified, ctx);
        // The chain verified but the certificate does not carry the name: say so.
        if (preverified && !ok) name_mismatch_ = true;
        return ok;
      });
      boost::system::error_code not_ip;
      asio::ip::make_address(server_name, not_ip);
      // SNI carries host names only, never addresses (RFC 6066).
      if (not_ip) SSL_set_tlsext_host_name(handle, server_name.c_str());
    }
    boost::system::error_code ec;
    co_await stream_.async_handshake(
        role == Role::kClient ? ssl::stream_base::client : ssl::stream_base::server,
        asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) co_return Status();
    std::string why = ec.message();
    const long verify = SSL_get_verify_result(handle);
    if (name_mismatch_) {
      why += fmt::format(" (the server's certificate is not for '{}')", server_name);
    } else if (verify != X509_V_OK) {
      why += fmt::format(" ({})", X509_verify_cert_error_string(verify));
    }
    co_return Status::error(is_tls_error(ec) ? ErrorKind::kRefused : ErrorKind::kClosed,
                            "TLS handshake: " + why);
  }

  asio::awaitable<void> read(asio::mutable_buffer buffer, boost::system::error_code& ec) override {
    co_await asio::async_read(stream_, buffer, asio::redirect_error(asio::use_awaitable, ec));
  }

  asio::awaitable<size_t> read_some(asio::mutable_buffer buffer,
                                    boost::system::error_code& ec) override {
    co_return co_await stream_.async_read_some(buffer,
                                               asio::redirect_error(asio::use_awaitable, ec));
  }

  asio::awaitable<void> write(const std::vector<asio::const_buffer>& buffers,
                              boost::system::error_code& ec) override {
    if (buffers.size() == 1) {
      co_await asio::async_write(stream_, buffers, asio::redirect_error(asio::use_awaitable, ec));
      co_return;
    }
    // An SSL stream writes one buffer per record: a batch of small frames goes as one.
    batch_.clear();
    for (const auto& b : buffers) batch_.append(static_cast<const char*>(b.data()), b.size());
    co_await asio::async_write(stream_, asio::buffer(batch_),
                               asio::redirect_error(asio::use_awaitable, ec));
  }

  bool is_tls_error(const boost::system::error_code& ec) const override {
    return ec.category() == asio::error::get_ssl_category();
  }

 private:
  std::shared_ptr<ssl::context> context_;  // outlives stream_
  ssl::stream<tcp::socket> stream_;
  std::string batch_;
  bool name_mismatch_ = false;
};

class Config final : public TlsConfig {
 public:
  explicit Config(std::shared_ptr<ssl::context> context) : context_(std::move(context)) {}
  std::unique_ptr<TlsTransport> wrap(tcp::socket socket) const override {
    return std::make_unique<Transport>(std::move(socket), context_);
  }
  ssl::context& context() { return *context_; }

 private:
  std::shared_ptr<ssl::context> context_;
};

std::shared_ptr<ssl::context> base_context(ssl::context::method method) {
  auto ctx = std::make_shared<ssl::context>(method);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  // A rendezvous connection is idle almost always: without this every one keeps ~70 KB of
  // record buffers (84 MiB at 1,000 connections, measured), with it a few KB.
  SSL_CTX_set_mode(ctx->native_handle(), SSL_MODE_RELEASE_BUFFERS);
  return ctx;
}

Status load(const char* what, const std::string& path, boost::system::error_code ec) {
  if (!ec) return Status();
  return Status::invalid_argument(fmt::format("TLS {} {}: {}", what, path, ec.message()));
}

Status use_identity(ssl::context& ctx, const std::string& cert, const std::string& key,
                    const char* role) {
  if (cert.empty() != key.empty()) {
    return Status::invalid_argument(
        fmt::format("TLS {} certificate and key go together: got a {} without a {}", role,
                    cert.empty() ? "key" : "certificate", cert.empty() ? "certificate" : "key"));
  }
  if (cert.empty()) return Status();
  boost::system::error_code ec;
  ctx.use_certificate_chain_file(cert, ec);
  if (Status s = load("certificate", cert, ec); !s) return s;
  ctx.use_private_key_file(key, ssl::context::pem, ec);
  if (Status s = load("key", key, ec); !s) return s;
  if (SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
    return Status::invalid_argument(
        fmt::format("TLS key {} does not belong to certificate {}", key, cert));
  }
  return Status();
}

}  // namespace

Result<TlsContext> make_server_tls(const TlsServerFiles& files) {
  if (files.cert_file.empty()) {
    return Status::invalid_argument("a TLS server needs a certificate and its key");
  }
  auto ctx = base_context(ssl::context::tls_server);
  if (Status s = use_identity(*ctx, files.cert_file, files.key_file, "server"); !s) return s;
  if (!files.client_ca_file.empty()) {
    boost::system::error_code ec;
    ctx->load_verify_file(files.client_ca_file, ec);
    if (Status s = load("client CA", files.client_ca_file, ec); !s) return s;
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  return TlsContext(std::make_shared<Config>(std::move(ctx)));
}

Result<TlsContext> make_client_tls(const TlsClientFiles& files) {
  if (files.ca_file.empty()) {
    return Status::invalid_argument(
        "a TLS client needs the CA file that verifies the server (tls_ca_file)");
  }
  auto ctx = base_context(ssl::context::tls_client);
  boost::system::error_code ec;
  ctx->load_verify_file(files.ca_file, ec);
  if (Status s = load("CA", files.ca_file, ec); !s) return s;
  ctx->set_verify_mode(ssl::verify_peer);
  if (Status s = use_identity(*ctx, files.cert_file, files.key_file, "client"); !s) return s;
  return TlsContext(std::make_shared<Config>(std::move(ctx)));
}

}  // namespace ddprun::rdzv::openssl
