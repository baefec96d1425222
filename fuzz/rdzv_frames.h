// The part both rendezvous frame targets share: a byte stream read the way a connection reads it
// (4-byte length, checked; then the body), each body decoded with the default limits and with
// tight ones, and the properties of rendezvous/wire/codec.h checked on every frame.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz/fuzz_check.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/payload_codec.h"

namespace ddprun::fuzz {

// Limits far below the defaults: strings, progress lists and frames hit them quickly.
inline rdzv::CodecLimits tight_limits() {
  rdzv::CodecLimits limits;
  limits.max_frame_bytes = 256;
  limits.max_string_bytes = 24;
  limits.max_progress_entries = 3;
  return limits;
}

// Checks one decoded-or-refused body. `decode` is decode_client_message or
// decode_server_message; `also` runs on every accepted message (what its receiver does next).
template <class Decode, class Also>
void check_frame(std::span<const uint8_t> header, std::span<const uint8_t> body, Decode decode,
                 Also also) {
  const rdzv::CodecLimits limits;
  auto message = decode(body, limits);
  auto tight = decode(body, tight_limits());
  if (!message) {
    // Refusals are clean and typed: a session answers them by kind, never by text.
    FUZZ_CHECK(message.status().is_malformed());
    FUZZ_CHECK(!message.error_message().empty());
    // Tighter limits accept a subset of what the defaults accept.
    FUZZ_CHECK(!tight.ok());
    return;
  }
  // The encoding is canonical: whatever decodes re-encodes to the very same bytes, so
  // decode(encode(m)) == m for every message a peer can send.
  const std::string again = rdzv::encode_frame(*message);
  const std::string original =
      std::string(header.begin(), header.end()) + std::string(body.begin(), body.end());
  FUZZ_CHECK(again == original);
  if (tight) FUZZ_CHECK(rdzv::encode_frame(*tight) == original);
  also(*message);
}

// Reads `stream` as a connection does, frame after frame, until it is used up, a frame header is
// refused (the connection would end) or a frame is incomplete.
template <class Decode, class Also>
void fuzz_frame_stream(std::span<const uint8_t> stream, Decode decode, Also also) {
  const rdzv::CodecLimits limits;
  while (stream.size() >= rdzv::kFrameHeaderBytes) {
    const auto header = stream.first<rdzv::kFrameHeaderBytes>();
    auto length = rdzv::decode_frame_length(header, limits);
    if (!length) {
      FUZZ_CHECK(length.status().is_malformed());
      return;
    }
    FUZZ_CHECK(*length >= 1 && *length <= limits.max_frame_bytes);
    if (stream.size() - rdzv::kFrameHeaderBytes < *length) return;
    check_frame(header, stream.subspan(rdzv::kFrameHeaderBytes, *length), decode, also);
    stream = stream.subspan(rdzv::kFrameHeaderBytes + *length);
  }
}

}  // namespace ddprun::fuzz
