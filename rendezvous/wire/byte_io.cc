#include "rendezvous/wire/byte_io.h"

namespace ddprun::rdzv {

void ByteWriter::u16(uint16_t v) {
  u8(static_cast<uint8_t>(v >> 8));
  u8(static_cast<uint8_t>(v));
}

void ByteWriter::u32(uint32_t v) {
  u16(static_cast<uint16_t>(v >> 16));
  u16(static_cast<uint16_t>(v));
}

void ByteWriter::u64(uint64_t v) {
  u32(static_cast<uint32_t>(v >> 32));
  u32(static_cast<uint32_t>(v));
}

void ByteWriter::str(std::string_view s) {
  u32(static_cast<uint32_t>(s.size()));
  out_.append(s.data(), s.size());
}

bool ByteReader::take(size_t n, const uint8_t*& p) {
  if (!ok_ || remaining() < n) {
    ok_ = false;
    return false;
  }
  p = in_.data() + pos_;
  pos_ += n;
  return true;
}

bool ByteReader::u8(uint8_t& v) {
  const uint8_t* p = nullptr;
  if (!take(1, p)) return false;
  v = p[0];
  return true;
}

bool ByteReader::u16(uint16_t& v) {
  const uint8_t* p = nullptr;
  if (!take(2, p)) return false;
  v = static_cast<uint16_t>((p[0] << 8) | p[1]);
  return true;
}

bool ByteReader::u32(uint32_t& v) {
  const uint8_t* p = nullptr;
  if (!take(4, p)) return false;
  v = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
  return true;
}

bool ByteReader::u64(uint64_t& v) {
  uint32_t hi = 0, lo = 0;
  if (!u32(hi) || !u32(lo)) return false;
  v = (uint64_t{hi} << 32) | lo;
  return true;
}

bool ByteReader::i32(int32_t& v) {
  uint32_t u = 0;
  if (!u32(u)) return false;
  v = static_cast<int32_t>(u);
  return true;
}

bool ByteReader::i64(int64_t& v) {
  uint64_t u = 0;
  if (!u64(u)) return false;
  v = static_cast<int64_t>(u);
  return true;
}

bool ByteReader::str(std::string& v, size_t max_len) {
  uint32_t len = 0;
  if (!u32(len)) return false;
  // Checked against the bytes really present before any allocation.
  if (len > max_len || len > remaining()) {
    ok_ = false;
    return false;
  }
  const uint8_t* p = nullptr;
  take(len, p);
  v.assign(reinterpret_cast<const char*>(p), len);
  return true;
}

bool ByteReader::count_fits(uint32_t count, size_t min_elem_bytes) const {
  return ok_ && uint64_t{count} * min_elem_bytes <= remaining();
}

}  // namespace ddprun::rdzv
