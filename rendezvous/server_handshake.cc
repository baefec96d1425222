#include "rendezvous/server_handshake.h"

#include <fmt/format.h>

#include "rendezvous/codec.h"
#include "rendezvous/security/challenge.h"

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
  return refused(Status::malformed(fmt::format("expected Hello, got {}", message_name(frame))));
}

ServerHandshake::Step ServerHandshake::auth_failure(const std::string& job_id,
                                                    const std::string& why) const {
  Step step = refused(Status::refused(
      fmt::format("authentication failed for job {} from {}: {}", job_id, peer_, why)));
  step.authentication_failed = true;
  return step;
}

ServerHandshake::Step ServerHandshake::on_hello(const Hello& hello) {
  if (hello.magic != kProtocolMagic) return refused(Status::malformed("bad protocol magic"));
  if (hello.version != kProtocolVersion) {
    return refused(
        Status::refused(fmt::format("protocol version {} is not supported (server speaks {})",
                                    hello.version, kProtocolVersion)));
  }
  if (hello.job_id.empty()) return refused(Status::malformed("Hello without a job id"));
  const Secret* token = credentials_ ? credentials_->token_for(hello.job_id) : nullptr;
  if (!token) return accepted(hello.job_id);
  if (hello.client_nonce.empty()) {
    return auth_failure(hello.job_id,
                        "the job requires a token and the client sent none (give the agent "
                        "--rdzv_conf token_file=PATH)");
  }
  if (hello.client_nonce.size() != kNonceBytes) {
    return refused(Status::malformed(
        fmt::format("Hello's nonce has {} bytes, not {}", hello.client_nonce.size(), kNonceBytes)));
  }
  auto nonce = random_nonce();
  if (!nonce) return refused(nonce.status());
  job_id_ = hello.job_id;
  token_ = token;
  client_nonce_ = hello.client_nonce;
  server_nonce_ = std::move(*nonce);
  Step step;
  step.challenge =
      AuthChallenge{server_nonce_, server_proof(*token_, job_id_, client_nonce_, server_nonce_)};
  return step;
}

ServerHandshake::Step ServerHandshake::on_proof(const AuthProofMsg& proof) {
  const std::string job_id = std::exchange(job_id_, {});
  if (proof.proof.empty()) {
    return auth_failure(job_id,
                        "the client could not verify this server's proof: the client and the "
                        "server hold different tokens");
  }
  if (!proofs_equal(client_proof(*token_, job_id, client_nonce_, server_nonce_), proof.proof)) {
    return auth_failure(job_id, "wrong token (the client's proof does not verify)");
  }
  return accepted(job_id);
}

}  // namespace ddprun::rdzv
