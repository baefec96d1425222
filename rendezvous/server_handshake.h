// The server's side of a connection's opening (the exchange is drawn in client_handshake.h),
// one per connection, as a small state machine fed the connection's first frames. No I/O:
// the session sends what it answers and acts on the outcome.
//
//   Hello, job without token, no nonce        → accepted
//   Hello, job with a token, a nonce          → AuthChallenge, then wait for AuthProof
//   AuthProof that verifies                   → accepted
//   Hello without nonce for a job with token,
//   a wrong AuthProof, or an empty one        → refused: "authentication failed for job <id>
//                                               from <addr>: <why>"
//
// A client with a token that meets a job without one gets HelloAck and refuses the server
// itself (the server cannot prove anything; see client_handshake.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "rendezvous/messages.h"
#include "rendezvous/security/credentials.h"

namespace ddprun::rdzv {

class ServerHandshake {
 public:
  struct Step {
    std::optional<AuthChallenge> challenge;  // send it and feed the next frame
    std::string accepted_job;                // set: the connection belongs to this job now
    Status refusal;                          // failed: send it as an Error and close
    bool authentication_failed = false;      // the refusal is an authentication failure
  };

  // `credentials` may be null (no job needs a token). `peer` names the client in messages.
  ServerHandshake(std::shared_ptr<const ServerCredentials> credentials, std::string peer);

  Step on_frame(const ClientMessage& frame);
  bool awaiting_proof() const { return !job_id_.empty(); }

 private:
  Step on_hello(const Hello& hello);
  Step on_proof(const AuthProofMsg& proof);
  Step auth_failure(const std::string& job_id, const std::string& why) const;

  std::shared_ptr<const ServerCredentials> credentials_;
  std::string peer_;
  // While a challenge is out: the job, its token and both nonces.
  std::string job_id_;
  const Secret* token_ = nullptr;
  std::string client_nonce_;
  std::string server_nonce_;
};

}  // namespace ddprun::rdzv
