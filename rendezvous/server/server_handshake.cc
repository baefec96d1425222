#include "rendezvous/server/server_handshake.h"

#include <utility>

#include <fmt/format.h>

#include "rendezvous/security/challenge.h"
#include "rendezvous/wire/codec.h"

namespace ddprun::rdzv {
namespace {
ServerHandshake::Step refused(Status why) {
  ServerHandshake::Step step;
  step.refusal = std::move(why);
  return step;
}
ServerHandshake::Step accepted(std::string job_id) {
  ServerHandshake::Step step;
  step.accepted_job = std::move(job_id);
  return step;
}
}  // namespace

ServerHandshake::ServerHandshake(std::shared_ptr<const ServerCredentials> credentials,
                                 std::string peer)
    : credentials_(std::move(credentials)), peer_(std::move(peer)) {}

ServerHandshake::Step ServerHandshake::on_frame(const ClientMessage& frame) {
  if (awaiting_proof()) {
    if (const auto* proof = std::get_if<AuthProofMsg>(&frame)) return on_proof(*proof);
    return refused(
        Status::malformed(fmt::format("expected AuthProof, got {}", message_name(frame))));
  }
  if (const auto* hello = std::get_if<Hello>(&frame)) return on_hello(*hello);
  if (const auto* query = std::get_if<StatusQuery>(&frame)) return on_status_query(*query);
  return refused(Status::malformed(fmt::format("expected Hello, got {}", message_name(frame))));
}

ServerHandshake::Step ServerHandshake::accept() const {
  if (!status_query_) return accepted(job_id_);
  Step step;
  step.accepted_status_query = true;
  return step;
}

ServerHandshake::Step ServerHandshake::auth_failure(const std::string& why) const {
  const std::string subject = status_query_ ? "the status query" : "job " + job_id_;
  Step step = refused(Status::refused(
      fmt::format("authentication failed for {} from {}: {}", subject, peer_, why)));
  step.authentication_failed = true;
  return step;
}

namespace {
// Hello's and StatusQuery's common checks.
Status check_version(uint32_t magic, uint16_t version) {
  if (magic != kProtocolMagic) return Status::malformed("bad protocol magic");
  if (version != kProtocolVersion) {
    return Status::refused(fmt::format("protocol version {} is not supported (server speaks {})",
                                       version, kProtocolVersion));
  }
  return Status();
}
}  // namespace

ServerHandshake::Step ServerHandshake::on_hello(const Hello& hello) {
  if (Status s = check_version(hello.magic, hello.version); !s) return refused(std::move(s));
  if (hello.job_id.empty()) return refused(Status::malformed("Hello without a job id"));
  job_id_ = hello.job_id;
  const Secret* token = credentials_ ? credentials_->token_for(hello.job_id) : nullptr;
  if (!token) return accept();
  if (hello.client_nonce.empty()) {
    return auth_failure(
        "the job requires a token and the client sent none (give the agent "
        "--rdzv_conf token_file=PATH)");
  }
  return challenge(hello.job_id, *token, hello.client_nonce);
}

ServerHandshake::Step ServerHandshake::on_status_query(const StatusQuery& query) {
  if (Status s = check_version(query.magic, query.version); !s) return refused(std::move(s));
  status_query_ = true;
  if (!credentials_ || !credentials_->has_tokens()) return accept();
  const Secret* token = credentials_->daemon_token();
  if (!token) {
    return auth_failure(
        "this server has per-job tokens only; give it --token-file for status queries");
  }
  if (query.client_nonce.empty()) {
    return auth_failure(
        "this server requires a token and the client sent none (give ddp-rendezvous status "
        "--token-file PATH, the daemon's --token-file)");
  }
  // Bound to an empty job id, which no Hello can carry: a status proof opens no job.
  return challenge("", *token, query.client_nonce);
}

ServerHandshake::Step ServerHandshake::challenge(const std::string& job_id, const Secret& token,
                                                 const std::string& client_nonce) {
  if (client_nonce.size() != kNonceBytes) {
    return refused(Status::malformed(fmt::format("{}'s nonce has {} bytes, not {}",
                                                 status_query_ ? "StatusQuery" : "Hello",
                                                 client_nonce.size(), kNonceBytes)));
  }
  auto nonce = random_nonce();
  if (!nonce) return refused(nonce.status());
  token_ = &token;
  client_nonce_ = client_nonce;
  server_nonce_ = std::move(*nonce);
  Step step;
  step.challenge =
      AuthChallenge{server_nonce_, server_proof(token, job_id, client_nonce_, server_nonce_)};
  return step;
}

ServerHandshake::Step ServerHandshake::on_proof(const AuthProofMsg& proof) {
  const Secret& token = *std::exchange(token_, nullptr);
  if (proof.proof.empty()) {
    return auth_failure(
        "the client could not verify this server's proof: the client and the server hold "
        "different tokens");
  }
  const std::string bound_job = status_query_ ? "" : job_id_;
  if (!proofs_equal(client_proof(token, bound_job, client_nonce_, server_nonce_), proof.proof)) {
    return auth_failure("wrong token (the client's proof does not verify)");
  }
  return accept();
}

}  // namespace ddprun::rdzv
