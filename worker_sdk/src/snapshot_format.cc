#include "snapshot_format.h"

#include <charconv>
#include <limits>
#include <stdexcept>
#include <utility>

#include <zlib.h>
#include <nlohmann/json.hpp>

namespace ddp::detail {

using ddprun::Result;
using ddprun::Status;

namespace {

// The header's integer field `name` as a T. nlohmann's get<T>() converts any number: a float
// out of T's range is undefined behaviour and a large integer wraps, so a corrupt header
// could yield garbage or crash; anything but a whole number within T's range is refused.
template <class T>
T integer_field(const nlohmann::json& header, const char* name) {
  const nlohmann::json& value = header.at(name);
  bool fits = false;
  if (value.is_number_unsigned()) {
    fits = std::in_range<T>(value.get<uint64_t>());
  } else if (value.is_number_integer()) {
    fits = std::in_range<T>(value.get<int64_t>());
  }
  if (!fits) {
    throw std::out_of_range("'" + std::string(name) + "' is " + value.dump() +
                            ", not a whole number from " +
                            std::to_string(std::numeric_limits<T>::min()) + " to " +
                            std::to_string(std::numeric_limits<T>::max()));
  }
  return value.is_number_unsigned() ? static_cast<T>(value.get<uint64_t>())
                                    : static_cast<T>(value.get<int64_t>());
}

}  // namespace

uint32_t crc32_of(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* data = reinterpret_cast<const Bytef*>(bytes.data());
  std::size_t left = bytes.size();
  // zlib takes uInt lengths: feed large payloads in chunks.
  while (left > 0) {
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    left -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::string encode_snapshot(SnapshotHeader header, std::string_view payload) {
  header.payload_bytes = payload.size();
  header.payload_crc32 = crc32_of(payload);
  nlohmann::json json = {
      {"epoch", header.epoch},
      {"step_in_epoch", header.step_in_epoch},
      {"global_step", header.global_step},
      {"world_size", header.world_size},
      {"user", header.user},
      {"payload_bytes", header.payload_bytes},
      {"payload_crc32", header.payload_crc32},
  };
  std::string out(kSnapshotMagic);
  out += std::to_string(kSnapshotFormatVersion) + "\n";
  out += json.dump() + "\n";
  out.append(payload);
  return out;
}

Result<DecodedSnapshot> decode_snapshot(std::string_view bytes) {
  if (bytes.substr(0, kSnapshotMagic.size()) != kSnapshotMagic) {
    return Status::error("not a ddp snapshot (bad magic; truncated or overwritten?)");
  }
  bytes.remove_prefix(kSnapshotMagic.size());
  const auto version_end = bytes.find('\n');
  if (version_end == std::string_view::npos || version_end > 10) {
    return Status::error("truncated or malformed version line");
  }
  int version = 0;
  auto [ptr, ec] = std::from_chars(bytes.data(), bytes.data() + version_end, version);
  if (ec != std::errc() || ptr != bytes.data() + version_end) {
    return Status::error("malformed version line");
  }
  if (version != kSnapshotFormatVersion) {
    return Status::error("format version " + std::to_string(version) + ", this SDK reads version " +
                         std::to_string(kSnapshotFormatVersion) +
                         " (written by a different SDK release; load it with that release)");
  }
  bytes.remove_prefix(version_end + 1);
  const auto header_end = bytes.find('\n');
  if (header_end == std::string_view::npos) {
    return Status::error(bytes.size() > kMaxHeaderBytes ? "header larger than 1 MiB"
                                                        : "truncated header");
  }
  if (header_end > kMaxHeaderBytes) return Status::error("header larger than 1 MiB");
  DecodedSnapshot out;
  try {
    auto json = nlohmann::json::parse(bytes.substr(0, header_end));
    out.header.epoch = integer_field<int64_t>(json, "epoch");
    out.header.step_in_epoch = integer_field<int64_t>(json, "step_in_epoch");
    out.header.global_step = integer_field<int64_t>(json, "global_step");
    out.header.world_size = integer_field<int>(json, "world_size");
    out.header.user = json.at("user").get<std::map<std::string, std::string>>();
    out.header.payload_bytes = integer_field<uint64_t>(json, "payload_bytes");
    out.header.payload_crc32 = integer_field<uint32_t>(json, "payload_crc32");
  } catch (const nlohmann::json::exception& e) {
    return Status::error(std::string("malformed header: ") + e.what());
  } catch (const std::out_of_range& e) {
    return Status::error(std::string("malformed header: ") + e.what());
  }
  bytes.remove_prefix(header_end + 1);
  if (bytes.size() != out.header.payload_bytes) {
    return Status::error(
        (bytes.size() < out.header.payload_bytes ? "truncated: " : "trailing bytes: ") +
        std::string("header promises ") + std::to_string(out.header.payload_bytes) +
        " payload bytes, file has " + std::to_string(bytes.size()));
  }
  const uint32_t crc = crc32_of(bytes);
  if (crc != out.header.payload_crc32) {
    return Status::error("checksum mismatch (payload CRC-32 " + std::to_string(crc) +
                         ", header says " + std::to_string(out.header.payload_crc32) +
                         "): the file is corrupt");
  }
  out.payload = bytes;
  return out;
}

}  // namespace ddp::detail
