// The module's TLS: contexts from files, and one Boost.Asio SSL stream per connection.
#pragma once

#include "common/result.h"
#include "rendezvous/security/provider.h"

namespace ddprun::rdzv::openssl {

Result<TlsContext> make_server_tls(const TlsServerFiles& files);
Result<TlsContext> make_client_tls(const TlsClientFiles& files);

}  // namespace ddprun::rdzv::openssl
