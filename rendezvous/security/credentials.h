// What each end of a rendezvous connection proves itself with: a job's shared token (the
// challenge-response of challenge.h) and, optionally, TLS (tls_context.h). Built once at start
// from files and shared, read-only, by every connection.
//
// Neither is required: without them the control plane trusts the network, as torchrun's does,
// which is right on loopback and on a trusted network and wrong anywhere else (the daemon says
// so at start when it listens beyond loopback without either).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/result.h"
#include "rendezvous/security/tls_context.h"
#include "rendezvous/security/token_file.h"

namespace ddprun::rdzv {

struct RendezvousConf;

struct ClientCredentials {
  Secret token;                 // empty: this client has no token
  TlsContext tls;               // null: plain TCP
  std::string tls_server_name;  // the name the server's certificate must carry; "" = the host
};

// Loads the client side from --rdzv_conf (token_file, tls_ca_file, tls_cert_file,
// tls_key_file, tls_server_name). Errors name the key and the file.
Result<ClientCredentials> load_client_credentials(const RendezvousConf& conf);

class ServerCredentials {
 public:
  // `default_token` (may be empty) guards every job without a token of its own.
  ServerCredentials(Secret default_token, std::map<std::string, Secret> job_tokens, TlsContext tls);

  // The token job `job_id` requires; null when it requires none.
  const Secret* token_for(const std::string& job_id) const;
  // The daemon-wide token (--token-file: every job without its own), which also guards status
  // queries; null when there is none.
  const Secret* daemon_token() const { return default_token_.empty() ? nullptr : &default_token_; }
  // TLS for every connection; null: plain TCP.
  const TlsContext& tls() const { return tls_; }
  bool has_tls() const { return tls_ != nullptr; }
  bool requires_client_certificates() const { return client_certificates_; }
  // True when some job (or every job) needs a token.
  bool has_tokens() const { return !default_token_.empty() || !job_tokens_.empty(); }
  void set_requires_client_certificates(bool on) { client_certificates_ = on; }

 private:
  Secret default_token_;
  std::map<std::string, Secret> job_tokens_;
  TlsContext tls_;
  bool client_certificates_ = false;
};

// The files a server authenticates with (the daemon's --token-file, tokens:, --tls-*; the
// embedded server's from --rdzv_conf).
struct ServerCredentialFiles {
  std::string token_file;                              // "" = no default token
  std::map<std::string, std::string> job_token_files;  // job id → token file
  TlsServerFiles tls;                                  // cert_file "" = no TLS
};

// The server an agent hosts (--standalone, or the c10d endpoint's host) guards itself with the
// agent's own --rdzv_conf: its token, and for TLS its certificate (tls_cert_file/tls_key_file)
// with tls_ca_file checking the other agents' certificates (mutual TLS).
ServerCredentialFiles embedded_server_files(const RendezvousConf& conf);

// Loads every file; errors name the file (and the job, for a per-job token).
Result<std::shared_ptr<const ServerCredentials>> load_server_credentials(
    const ServerCredentialFiles& files);

}  // namespace ddprun::rdzv
