// The pure encode/decode layer of the TCPStore protocol (both dialects, see protocol.md).
//
// TCPStore queries carry no frame length: a query is a type byte followed by its arguments,
// so the decoder works on whatever prefix of the stream has arrived and says either "here is
// one query and the bytes it used", "I need at least N bytes", or "malformed". Integers and
// lengths are little-endian (torch writes host order; every supported host is little-endian);
// string and byte-vector lengths are u64 (size_t).
//
// No I/O, no exceptions. Every length and count is checked against CodecLimits, and against
// the bytes present, before anything is allocated: a peer's numbers never size a buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "store/messages.h"

namespace ddprun::store {

// Hard limits on a client's queries. Defaults are above what any c10d user sends and far
// below what would hurt the agent hosting the store.
struct CodecLimits {
  // Longest key. torch 2.x's libuv server allows 8 KiB; 1.x had no limit. Default 64 KiB.
  uint64_t max_key_bytes = 64u << 10;
  // Largest value (set, compare_set, append, multi_set, queue_push). torch 2.x's libuv server
  // allows 8 MiB. Default 64 MiB.
  uint64_t max_value_bytes = 64u << 20;
  // Most keys in one check / wait / multi_get / multi_set. torch 2.x allows 128 Ki. Default
  // 128 Ki.
  uint64_t max_keys_per_request = 128u << 10;
  // Largest whole query, all arguments included. Default 128 MiB.
  uint64_t max_request_bytes = 128u << 20;
};

// The outcome of looking at a connection's first bytes: a dialect, or how many bytes are
// needed to decide (1, or 5 when the first byte is 0: VALIDATE and legacy SET share it).
struct DialectProbe {
  Dialect dialect = Dialect::kUnknown;
  size_t need = 0;  // when kUnknown: the buffer must hold this many bytes
};
DialectProbe detect_dialect(std::span<const uint8_t> first_bytes);

// One step of decoding the front of a connection's buffered input.
struct DecodeStep {
  std::optional<Request> request;  // a whole query, when one was there
  size_t consumed = 0;             // with `request`: the bytes it used
  size_t need = 0;                 // without: the buffer must hold at least this many bytes
};

// Decodes one query from the start of `in` in `dialect` (kLegacy or kValidated). Errors
// (kMalformed) name the query and the field: an unknown type byte, a length or count above a
// limit, a query larger than max_request_bytes.
Result<DecodeStep> decode_request(std::span<const uint8_t> in, Dialect dialect,
                                  const CodecLimits& limits);

// The wire bytes of a query in `dialect`; the inverse of decode_request. For clients and
// tests. A query that does not exist in the dialect (PING in legacy, WATCH_KEY in validated)
// is a programming error.
std::string encode_request(const Request& request, Dialect dialect);

// The wire type byte of `op` in `dialect`, or nullopt when the dialect lacks it.
std::optional<uint8_t> wire_type(Op op, Dialect dialect);

// Replies (server → client).
std::string encode_value(std::string_view value);  // u64 length + bytes
std::string encode_i64(int64_t value);
std::string encode_u32(uint32_t value);
std::string encode_check(CheckReply reply);  // one byte
std::string encode_wait(WaitReply reply);    // one byte
// LIST_KEYS: a u64 count, then each key (u64 length + bytes).
std::string encode_keys(const std::vector<std::string>& keys);
// QUEUE_POP: the queue's length before the pop, then the popped value when it was not empty.
std::string encode_queue_pop(int64_t length_before, std::optional<std::string_view> value);
// WATCH_KEY's acknowledgement (one byte) and the change events that follow it.
std::string encode_watch_registered();
std::string encode_watch_event(const WatchEvent& event);

}  // namespace ddprun::store
