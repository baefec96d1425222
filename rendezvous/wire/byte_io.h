// Bounded big-endian byte readers and writers: the primitives under the wire codec.
//
// Pure: no I/O, no exceptions. A ByteReader never reads past its span and never allocates more
// than the bytes that are actually present, so a peer's length fields cannot make us allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ddprun::rdzv {

// Appends big-endian integers and length-prefixed strings to a std::string buffer.
class ByteWriter {
 public:
  explicit ByteWriter(std::string& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  // u32 length, then the bytes.
  void str(std::string_view s);

 private:
  std::string& out_;
};

// Reads from a fixed span. Every getter returns false (and leaves the reader failed) when the
// span is too short; once failed, every later call fails too, so callers check ok() once.
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> in) : in_(in) {}
  bool u8(uint8_t& v);
  bool u16(uint16_t& v);
  bool u32(uint32_t& v);
  bool u64(uint64_t& v);
  bool i32(int32_t& v);
  bool i64(int64_t& v);
  // A u32 length then that many bytes; fails when the length exceeds the bytes left or
  // `max_len`, before allocating.
  bool str(std::string& v, size_t max_len);
  // For list counts: true when `count` elements of at least `min_elem_bytes` each could fit.
  bool count_fits(uint32_t count, size_t min_elem_bytes) const;

  bool ok() const { return ok_; }
  size_t remaining() const { return in_.size() - pos_; }
  bool at_end() const { return ok_ && pos_ == in_.size(); }

 private:
  bool take(size_t n, const uint8_t*& p);
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace ddprun::rdzv
