#include "store/read_buffer.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace ddprun::store::detail {

std::span<uint8_t> ReadBuffer::space(size_t need) {
  const size_t missing = need > size_ ? need - size_ : 0;
  size_t wanted = std::min(missing, kMaxGrowth);
  // A read that filled the buffer suggests more is on the way: double, within kMaxGrowth.
  if (size_ == capacity_) wanted = std::max(wanted, std::min(capacity_, kMaxGrowth));
  wanted = std::max(wanted, kInitial - std::min(size_, kInitial));
  if (capacity_ - size_ < wanted) reallocate(size_ + wanted);
  return {bytes_.get() + size_, capacity_ - size_};
}

void ReadBuffer::commit(size_t n) {
  assert(n <= capacity_ - size_);
  size_ += n;
}

void ReadBuffer::consume(size_t n) {
  assert(n <= size_);
  size_ -= n;
  if (size_ > 0) {
    std::memmove(bytes_.get(), bytes_.get() + n, size_);
  } else if (capacity_ > kKeepAtMost) {
    bytes_.reset();
    capacity_ = 0;
  }
}

void ReadBuffer::reallocate(size_t capacity) {
  // Not zero-filled: only bytes a read wrote are ever looked at.
  auto bigger = std::make_unique_for_overwrite<uint8_t[]>(capacity);
  if (size_ > 0) std::memcpy(bigger.get(), bytes_.get(), size_);
  bytes_ = std::move(bigger);
  capacity_ = capacity;
}

}  // namespace ddprun::store::detail
