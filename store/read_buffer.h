// The bytes a connection has received and not yet decoded. A plain vector would be resized
// (and zero-filled) to a whole read chunk before every read, and keep that chunk for as long
// as the connection is open: with a job's every rank connected and sending a few dozen bytes
// at a time, that was 16 KiB of memset per read and 16 KiB of memory per connection. This
// buffer starts small, is never zero-filled, grows only with what arrives or with what a
// query's header says it needs (bounded, see space()), and gives a large buffer back once it
// has been drained.
//
// Not thread-safe; owned by one connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace ddprun::store::detail {

class ReadBuffer {
 public:
  // A new or drained buffer holds this much room (enough for any query of c10d's
  // init_process_group traffic in one read).
  static constexpr size_t kInitial = 512;
  // What space() may grow the buffer by beyond the bytes already held: memory follows the
  // bytes a client really sends, not the lengths it claims.
  static constexpr size_t kMaxGrowth = 1u << 20;
  // A drained buffer larger than this is given back (a large SET does not keep its buffer).
  static constexpr size_t kKeepAtMost = 64u << 10;

  // The bytes held, oldest first.
  std::span<const uint8_t> data() const { return {bytes_.get(), size_}; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }

  // Room for the next read, after the bytes held: at least `need` - size() bytes when the
  // decoder needs that many in all (at most kMaxGrowth of it at once), and at least the
  // buffer's current size again when a read filled it (a client streaming a large query).
  std::span<uint8_t> space(size_t need);
  // The next `n` bytes of space() were filled by a read.
  void commit(size_t n);
  // The oldest `n` bytes were decoded: they go, the rest moves to the front.
  void consume(size_t n);

 private:
  void reallocate(size_t capacity);

  std::unique_ptr<uint8_t[]> bytes_;
  size_t size_ = 0;      // bytes held, from bytes_[0]
  size_t capacity_ = 0;  // bytes allocated at bytes_
};

}  // namespace ddprun::store::detail
