// The module's entry point: OpenSSL behind the SecurityProvider interface (provider.h).
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include "rendezvous/security/openssl/openssl_tls.h"
#include "rendezvous/security/provider.h"

namespace ddprun::rdzv::openssl {
namespace {

class OpenSslProvider final : public SecurityProvider {
 public:
  Status random_bytes(std::span<uint8_t> out) const override {
    if (RAND_bytes(out.data(), static_cast<int>(out.size())) == 1) return Status();
    char reason[256];
    ERR_error_string_n(ERR_get_error(), reason, sizeof reason);
    return Status::error(std::string("OpenSSL's random generator failed: ") + reason);
  }

  std::array<uint8_t, kMacBytes> hmac_sha256(std::span<const uint8_t> key,
                                             std::string_view message) const override {
    std::array<uint8_t, kMacBytes> mac{};
    unsigned int mac_len = 0;
    const unsigned char* result = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                                       reinterpret_cast<const unsigned char*>(message.data()),
                                       message.size(), mac.data(), &mac_len);
    // HMAC-SHA256 over memory cannot fail short of OpenSSL being unusable.
    if (result == nullptr || mac_len != kMacBytes) std::abort();
    return mac;
  }

  bool equal_constant_time(std::string_view a, std::string_view b) const override {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
  }

  Result<TlsContext> make_server_tls(const TlsServerFiles& files) const override {
    return openssl::make_server_tls(files);
  }
  Result<TlsContext> make_client_tls(const TlsClientFiles& files) const override {
    return openssl::make_client_tls(files);
  }
};

}  // namespace
}  // namespace ddprun::rdzv::openssl

extern "C" __attribute__((visibility("default"))) const ddprun::rdzv::SecurityProvider*
ddprun_security_provider_v1() {
  static const ddprun::rdzv::openssl::OpenSslProvider provider;
  return &provider;
}
