#include "rendezvous/security/tls_context.h"

#include <fmt/format.h>
#include <openssl/ssl.h>

namespace ddprun::rdzv {
namespace ssl = boost::asio::ssl;
namespace {

TlsContext base_context(ssl::context::method method) {
  auto ctx = std::make_shared<ssl::context>(method);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
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
  TlsContext ctx = base_context(ssl::context::tls_server);
  if (Status s = use_identity(*ctx, files.cert_file, files.key_file, "server"); !s) return s;
  if (!files.client_ca_file.empty()) {
    boost::system::error_code ec;
    ctx->load_verify_file(files.client_ca_file, ec);
    if (Status s = load("client CA", files.client_ca_file, ec); !s) return s;
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

Result<TlsContext> make_client_tls(const TlsClientFiles& files) {
  if (files.ca_file.empty()) {
    return Status::invalid_argument(
        "a TLS client needs the CA file that verifies the server (tls_ca_file)");
  }
  TlsContext ctx = base_context(ssl::context::tls_client);
  boost::system::error_code ec;
  ctx->load_verify_file(files.ca_file, ec);
  if (Status s = load("CA", files.ca_file, ec); !s) return s;
  ctx->set_verify_mode(ssl::verify_peer);
  if (Status s = use_identity(*ctx, files.cert_file, files.key_file, "client"); !s) return s;
  return ctx;
}

}  // namespace ddprun::rdzv
