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
// A StatusQuery (ddp-rendezvous status) opens the same way, with the daemon-wide token
// (ServerCredentials::daemon_token) in place of a job's, and the proofs bound to an empty job
// id (no Hello may carry one). A server without tokens accepts it at once; one with per-job
// tokens only refuses it ("authentication failed for the status query from <addr>: ...").
//
// A client with a token that meets a job without one gets HelloAck and refuses the server
// itself (the server cannot prove anything; see client_handshake.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "rendezvous/security/credentials.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

class ServerHandshake {
 public:
  struct Step {
    std::optional<AuthChallenge> challenge;  // send it and feed the next frame
    std::string accepted_job;                // set: the connection belongs to this job now
    bool accepted_status_query = false;      // set: answer the StatusReport and close
    Status refusal;                          // failed: send it as an Error and close
    bool authentication_failed = false;      // the refusal is an authentication failure
  };

  // `credentials` may be null (no job needs a token). `peer` names the client in messages.
  ServerHandshake(std::shared_ptr<const ServerCredentials> credentials, std::string peer);

  Step on_frame(const ClientMessage& frame);
  bool awaiting_proof() const { return token_ != nullptr; }

 private:
  Step on_hello(const Hello& hello);
  Step on_status_query(const StatusQuery& query);
  Step challenge(const std::string& job_id, const Secret& token, const std::string& client_nonce);
  Step on_proof(const AuthProofMsg& proof);
  Step accept() const;
  Step auth_failure(const std::string& why) const;

  std::shared_ptr<const ServerCredentials> credentials_;
  std::string peer_;
  // The frame being answered: a Hello for job_id_, or a StatusQuery (status_query_).
  bool status_query_ = false;
  std::string job_id_;
  // While a challenge is out: the token and both nonces.
  const Secret* token_ = nullptr;
  std::string client_nonce_;
  std::string server_nonce_;
};

}  // namespace ddprun::rdzv
