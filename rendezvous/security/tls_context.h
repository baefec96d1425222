// TLS settings for rendezvous connections, built once from files (tls_files.h) and shared by
// every connection; the work is done by the OpenSSL module (provider.h), loaded here on first
// use. Errors name the file and OpenSSL's reason, or why the module could not be loaded.
#pragma once

#include "common/result.h"
#include "rendezvous/security/provider.h"
#include "rendezvous/security/tls_files.h"

namespace ddprun::rdzv {

Result<TlsContext> make_server_tls(const TlsServerFiles& files);
Result<TlsContext> make_client_tls(const TlsClientFiles& files);

}  // namespace ddprun::rdzv
