#include "stack_trace.h"

#include <execinfo.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <mutex>

#include <absl/debugging/symbolize.h>

namespace ddp::detail {
namespace {

// Appends to a fixed buffer without allocating; keeps one byte for the terminating NUL.
class FixedWriter {
 public:
  FixedWriter(char* out, std::size_t capacity) : out_(out), capacity_(capacity) {
    if (capacity_ > 0) out_[0] = '\0';
  }
  void text(const char* s) {
    while (*s != '\0') put(*s++);
  }
  void hex(std::uintptr_t value) {
    char digits[2 * sizeof value];
    int n = 0;
    do {
      digits[n++] = "0123456789abcdef"[value & 0xf];
      value >>= 4;
    } while (value != 0);
    text("0x");
    while (n > 0) put(digits[--n]);
  }
  void decimal(unsigned value) {
    char digits[12];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value != 0);
    while (n > 0) put(digits[--n]);
  }
  std::size_t size() const { return size_; }

 private:
  void put(char c) {
    if (size_ + 1 >= capacity_) return;
    out_[size_++] = c;
    out_[size_] = '\0';
  }
  char* out_;
  std::size_t capacity_;
  std::size_t size_ = 0;
};

}  // namespace

void warm_up_stack_trace() {
  static std::once_flag once;
  std::call_once(once, [] {
    absl::InitializeSymbolizer("/proc/self/exe");
    void* frames[4];
    const int n = ::backtrace(frames, 4);
    char name[256];
    if (n > 0) absl::Symbolize(frames[0], name, sizeof name);
  });
}

int capture_stack(void** frames, int max_frames, int skip) {
  void* raw[kMaxStackFrames + 16];
  const int wanted = std::min(max_frames + skip + 1, static_cast<int>(std::size(raw)));
  const int n = ::backtrace(raw, wanted);
  const int first = std::min(n, skip + 1);  // + 1: this function's own frame
  const int count = std::min(n - first, max_frames);
  for (int i = 0; i < count; ++i) frames[i] = raw[first + i];
  return count;
}

std::size_t format_stack(void* const* frames, int count, int first_number, bool exact_first,
                         char* out, std::size_t capacity) {
  FixedWriter w(out, capacity);
  char name[1024];
  for (int i = 0; i < count; ++i) {
    const auto pc = reinterpret_cast<std::uintptr_t>(frames[i]);
    // A return address points after the call; the call itself belongs to the function
    // (or inlined line) one byte earlier.
    const auto lookup = (i == 0 && exact_first) || pc == 0 ? pc : pc - 1;
    w.text("  #");
    w.decimal(static_cast<unsigned>(first_number + i));
    w.text(" ");
    w.hex(pc);
    w.text(" ");
    w.text(absl::Symbolize(reinterpret_cast<void*>(lookup), name, sizeof name) ? name
                                                                               : "(unknown)");
    w.text("\n");
  }
  return w.size();
}

std::string format_stack(const std::vector<void*>& frames) {
  std::string out(static_cast<std::size_t>(frames.size()) * 1100 + 1, '\0');
  out.resize(format_stack(frames.data(), static_cast<int>(frames.size()), 0, false, out.data(),
                          out.size()));
  return out;
}

std::string current_stack(int skip) {
  warm_up_stack_trace();
  std::vector<void*> frames(kMaxStackFrames);
  frames.resize(static_cast<std::size_t>(capture_stack(frames.data(), kMaxStackFrames, skip + 1)));
  return format_stack(frames);
}

}  // namespace ddp::detail
