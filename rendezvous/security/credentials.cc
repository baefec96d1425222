#include "rendezvous/security/credentials.h"

#include <fmt/format.h>

#include "rendezvous/conf/rdzv_conf.h"

namespace ddprun::rdzv {

Result<ClientCredentials> load_client_credentials(const RendezvousConf& conf) {
  ClientCredentials credentials;
  if (!conf.token_file.empty()) {
    auto token = load_token_file(conf.token_file);
    if (!token) return token.status().with_context("--rdzv_conf token_file");
    credentials.token = std::move(*token);
  }
  if (!conf.tls_ca_file.empty()) {
    auto tls = make_client_tls(TlsClientFiles{conf.tls_ca_file, conf.tls_cert_file,
                                              conf.tls_key_file, conf.tls_server_name});
    if (!tls) return tls.status().with_context("--rdzv_conf TLS");
    credentials.tls = std::move(*tls);
    credentials.tls_server_name = conf.tls_server_name;
  }
  return credentials;
}

ServerCredentials::ServerCredentials(Secret default_token, std::map<std::string, Secret> job_tokens,
                                     TlsContext tls)
    : default_token_(std::move(default_token)),
      job_tokens_(std::move(job_tokens)),
      tls_(std::move(tls)) {}

const Secret* ServerCredentials::token_for(const std::string& job_id) const {
  if (auto it = job_tokens_.find(job_id); it != job_tokens_.end()) return &it->second;
  return default_token_.empty() ? nullptr : &default_token_;
}

ServerCredentialFiles embedded_server_files(const RendezvousConf& conf) {
  ServerCredentialFiles files;
  files.token_file = conf.token_file;
  files.tls.cert_file = conf.tls_cert_file;
  files.tls.key_file = conf.tls_key_file;
  if (!conf.tls_cert_file.empty()) files.tls.client_ca_file = conf.tls_ca_file;
  return files;
}

Result<std::shared_ptr<const ServerCredentials>> load_server_credentials(
    const ServerCredentialFiles& files) {
  Secret default_token;
  if (!files.token_file.empty()) {
    auto token = load_token_file(files.token_file);
    if (!token) return token.status();
    default_token = std::move(*token);
  }
  std::map<std::string, Secret> job_tokens;
  for (const auto& [job, path] : files.job_token_files) {
    auto token = load_token_file(path);
    if (!token) return token.status().with_context(fmt::format("token of job '{}'", job));
    job_tokens.emplace(job, std::move(*token));
  }
  TlsContext tls;
  if (!files.tls.cert_file.empty()) {
    auto made = make_server_tls(files.tls);
    if (!made) return made.status();
    tls = std::move(*made);
  }
  auto credentials =
      std::make_shared<ServerCredentials>(std::move(default_token), std::move(job_tokens), tls);
  credentials->set_requires_client_certificates(tls && !files.tls.client_ca_file.empty());
  return std::shared_ptr<const ServerCredentials>(std::move(credentials));
}

}  // namespace ddprun::rdzv
