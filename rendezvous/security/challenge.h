// The mutual challenge-response that authenticates both ends of a rendezvous connection with
// a job's shared secret, without the secret ever crossing the wire (protocol.md, "Handshake"):
//
//   client → Hello{job, client_nonce}
//   server → AuthChallenge{server_nonce, server_proof}   the server proves it holds the secret
//   client → AuthProof{client_proof}                     the client proves it holds the secret
//   server → HelloAck | Error
//
// Each proof is HMAC-SHA256(secret, label ‖ job ‖ client_nonce ‖ server_nonce), with a
// different label per direction, so a proof cannot be reflected back to its sender, and both
// nonces fresh from OpenSSL's CSPRNG, so a recorded proof is worthless in any other handshake.
// Pure functions: no I/O, no state.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/result.h"
#include "rendezvous/security/token_file.h"

namespace ddprun::rdzv {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  // SHA-256

// kNonceBytes from the CSPRNG; an error only when OpenSSL cannot seed it.
Result<std::string> random_nonce();

// What the server sends to prove it holds `secret` for `job_id`.
std::string server_proof(const Secret& secret, std::string_view job_id,
                         std::string_view client_nonce, std::string_view server_nonce);
// What the client sends back.
std::string client_proof(const Secret& secret, std::string_view job_id,
                         std::string_view client_nonce, std::string_view server_nonce);

// Constant-time comparison (no timing oracle on how many bytes matched).
bool proofs_equal(std::string_view expected, std::string_view received);

}  // namespace ddprun::rdzv
