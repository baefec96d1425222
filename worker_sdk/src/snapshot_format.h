// The snapshot file format: a pure codec (no I/O), tested on byte strings.
//
//   "DDPSNAP <format version>\n"
//   <header: one line of JSON, at most kMaxHeaderBytes>\n
//   <payload: payload_bytes bytes, a LibTorch archive (torch::serialize::OutputArchive)>
//
// The header carries the training progress and user key/values (readable with `head -2`),
// the payload's size and its CRC-32. Decoding checks, in order: magic, version, header size,
// JSON, payload size, checksum; each failure is a message naming what is wrong.
// Version history: 1 (initial).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/result.h"

namespace ddp::detail {

inline constexpr int kSnapshotFormatVersion = 1;
inline constexpr std::string_view kSnapshotMagic = "DDPSNAP ";
inline constexpr std::size_t kMaxHeaderBytes = 1 << 20;

struct SnapshotHeader {
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  int64_t global_step = 0;
  int world_size = 1;
  std::map<std::string, std::string> user;
  // Filled by encode_snapshot(); checked by decode_snapshot().
  uint64_t payload_bytes = 0;
  uint32_t payload_crc32 = 0;
};

struct DecodedSnapshot {
  SnapshotHeader header;
  std::string_view payload;  // a view into the decoded bytes
};

uint32_t crc32_of(std::string_view bytes);

// The complete file contents for `payload` with `header` (its payload fields are overwritten).
std::string encode_snapshot(SnapshotHeader header, std::string_view payload);

// Parses a whole file's contents. The error says what is wrong ("truncated", "checksum
// mismatch", "format version 7, this SDK reads version 1", ...), without the file name.
ddprun::Result<DecodedSnapshot> decode_snapshot(std::string_view bytes);

}  // namespace ddp::detail
