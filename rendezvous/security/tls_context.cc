#include "rendezvous/security/tls_context.h"

namespace ddprun::rdzv {

Result<TlsContext> make_server_tls(const TlsServerFiles& files) {
  auto provider = security_provider();
  if (!provider) return provider.status().with_context("TLS");
  return (*provider)->make_server_tls(files);
}

Result<TlsContext> make_client_tls(const TlsClientFiles& files) {
  auto provider = security_provider();
  if (!provider) return provider.status().with_context("TLS");
  return (*provider)->make_client_tls(files);
}

}  // namespace ddprun::rdzv
