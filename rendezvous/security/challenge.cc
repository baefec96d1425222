#include "rendezvous/security/challenge.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "rendezvous/security/provider.h"

namespace ddprun::rdzv {
namespace {

// The module, which a token's presence means was loaded (load_token_file checks). A Secret
// made some other way (tests) loads it here; one that cannot be loaded then is fatal, since a
// proof cannot be made without it.
const SecurityProvider& provider() {
  auto loaded = security_provider();
  if (!loaded) {
    (void)std::fprintf(stderr, "ddprun: %s\n", loaded.error_message().c_str());
    std::abort();
  }
  return **loaded;
}

void append_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

// Every field length-prefixed, so that no two different (job, nonce, nonce) triples share an
// input.
std::string proof(const Secret& secret, std::string_view label, std::string_view job_id,
                  std::string_view client_nonce, std::string_view server_nonce) {
  std::string input;
  input.reserve(label.size() + job_id.size() + client_nonce.size() + server_nonce.size() + 16);
  for (std::string_view field : {label, job_id, client_nonce, server_nonce}) {
    append_u32(input, static_cast<uint32_t>(field.size()));
    input.append(field);
  }
  const auto mac = provider().hmac_sha256(secret.bytes(), input);
  return std::string(reinterpret_cast<const char*>(mac.data()), mac.size());
}

}  // namespace

Result<std::string> random_nonce() {
  auto loaded = security_provider();
  if (!loaded) return loaded.status();
  std::string nonce(kNonceBytes, '\0');
  Status drawn = (*loaded)->random_bytes(
      std::span<uint8_t>(reinterpret_cast<uint8_t*>(nonce.data()), nonce.size()));
  if (!drawn) return drawn.with_context("cannot draw a random nonce");
  return nonce;
}

std::string server_proof(const Secret& secret, std::string_view job_id,
                         std::string_view client_nonce, std::string_view server_nonce) {
  return proof(secret, "ddprun rendezvous server proof v3", job_id, client_nonce, server_nonce);
}

std::string client_proof(const Secret& secret, std::string_view job_id,
                         std::string_view client_nonce, std::string_view server_nonce) {
  return proof(secret, "ddprun rendezvous client proof v3", job_id, client_nonce, server_nonce);
}

bool proofs_equal(std::string_view expected, std::string_view received) {
  return provider().equal_constant_time(expected, received);
}

}  // namespace ddprun::rdzv
