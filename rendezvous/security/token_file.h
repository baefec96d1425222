// A job's shared secret, read from a token file (`--rdzv_conf token_file=PATH` on agents,
// `--token-file` / `tokens:` on the daemon).
//
// The file holds the secret as text (e.g. `openssl rand -hex 32 > job.token; chmod 600
// job.token`); surrounding whitespace is not part of it. A file that its group or anyone else
// may read or write is refused with a message that says so and how to fix it, as ssh does with
// private keys: a secret everyone on the machine can read protects nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace ddprun::rdzv {

// Secret bytes, wiped from memory when destroyed. Never logged or sent.
class Secret {
 public:
  Secret() = default;
  explicit Secret(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  ~Secret();
  Secret(const Secret& other) = default;
  Secret& operator=(const Secret& other);
  Secret(Secret&& other) noexcept = default;
  Secret& operator=(Secret&& other) noexcept;

  bool empty() const { return bytes_.empty(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  void wipe();
  std::vector<uint8_t> bytes_;
};

// Shorter tokens are refused: they can be guessed offline from one recorded handshake.
inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 4096;

// Reads and checks a token file. Errors name the file: missing or unreadable (kNotFound /
// kFailed), not a regular file, readable or writable by group or others (kRefused, with the
// chmod that fixes it), empty, shorter than kMinTokenBytes or longer than kMaxTokenBytes
// (kInvalidArgument).
Result<Secret> load_token_file(const std::string& path);

}  // namespace ddprun::rdzv
