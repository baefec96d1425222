// The pure encode/decode layer of the rendezvous wire protocol (documented in protocol.md).
//
// No I/O and no exceptions: encoders return whole frames ready to write; decoders take the
// bytes of one frame body and return a message or an error Status. Every length read from the
// wire is checked against CodecLimits and against the bytes present before anything is
// allocated, so any byte string — garbage, truncated, oversized — yields a clean error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/result.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

// Hard limits on what a peer may send. Defaults suit thousands of nodes per job.
struct CodecLimits {
  // Largest frame body (type byte + payload) accepted; larger length prefixes are rejected
  // before reading the body. Default 1 MiB.
  uint32_t max_frame_bytes = 1u << 20;
  // Longest string field (ids, addresses, messages, reports). Default 512 KiB.
  uint32_t max_string_bytes = 512u << 10;
  // Most rank entries in one progress message or answer. Default 65536.
  uint32_t max_progress_entries = 65536;
};

// A frame is a 4-byte big-endian body length, then the body: one type byte and the payload.
inline constexpr size_t kFrameHeaderBytes = 4;

// Reads the body length from a frame header; an error when it is zero or above the limit.
Result<uint32_t> decode_frame_length(std::span<const uint8_t, kFrameHeaderBytes> header,
                                     const CodecLimits& limits);

// Whole frames (header included).
std::string encode_frame(const ClientMessage& message);
std::string encode_frame(const ServerMessage& message);

// Decodes one frame body (what follows the 4-byte header). Trailing bytes are an error.
Result<ClientMessage> decode_client_message(std::span<const uint8_t> body,
                                            const CodecLimits& limits);
Result<ServerMessage> decode_server_message(std::span<const uint8_t> body,
                                            const CodecLimits& limits);

// Convenience for tests and tools: splits the header off a whole frame and decodes it.
Result<ClientMessage> decode_client_frame(std::string_view frame, const CodecLimits& limits);
Result<ServerMessage> decode_server_frame(std::string_view frame, const CodecLimits& limits);

// The message's name for logs ("Join", "Resume", ...).
const char* message_name(const ClientMessage& message);

}  // namespace ddprun::rdzv
