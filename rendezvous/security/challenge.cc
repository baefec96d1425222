#include "rendezvous/security/challenge.h"

#include <cstdint>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace ddprun::rdzv {
namespace {

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
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  const auto& key = secret.bytes();
  const unsigned char* result =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &mac_len);
  // HMAC-SHA256 over memory cannot fail short of OpenSSL being unusable.
  if (result == nullptr || mac_len != kProofBytes) std::abort();
  return std::string(reinterpret_cast<const char*>(mac), mac_len);
}

}  // namespace

Result<std::string> random_nonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) !=
      1) {
    char reason[256];
    ERR_error_string_n(ERR_get_error(), reason, sizeof reason);
    return Status::error(std::string("cannot draw a random nonce: ") + reason);
  }
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
  return expected.size() == received.size() &&
         CRYPTO_memcmp(expected.data(), received.data(), expected.size()) == 0;
}

}  // namespace ddprun::rdzv
