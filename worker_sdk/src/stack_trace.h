// Native stack traces that can be taken and printed inside a signal handler.
//
// Used by the failure handlers (a worker that dies of SIGSEGV, or that the launcher sends
// SIGABRT because it hangs, prints where it was), by ddp::Error (where it was thrown) and by
// ddp::record. LibTorch-free.
//
// Why these pieces: glibc's backtrace() unwinds with the DWARF call-frame information of
// libgcc, which works through LibTorch's frames (built without frame pointers) and through
// the kernel's signal frame; absl::Symbolize names functions from the ELF symbol tables
// (static functions included) and demangles them without allocating. Both are
// async-signal-safe once warm_up_stack_trace() has loaded the unwinder.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ddp::detail {

inline constexpr int kMaxStackFrames = 64;

// Loads the unwinder (glibc dlopens libgcc_s on first use, which allocates) and the
// symbolizer's tables. Call once outside any signal handler; idempotent and thread-safe.
void warm_up_stack_trace();

// Fills `frames` with the calling thread's return addresses, innermost first, after dropping
// `skip` innermost frames (capture_stack's own frame is always dropped). Returns the count.
// Async-signal-safe after warm_up_stack_trace().
int capture_stack(void** frames, int max_frames, int skip);

// Writes one line per frame, "  #<n> 0x<address> <function>\n" with n counting from
// `first_number`, into `out` (always NUL-terminated, cut at `capacity`). Return addresses are
// looked up one byte earlier, so a call that ends a function is attributed to its caller;
// `exact_first` says frames[0] is an exact program counter (the interrupted instruction of a
// signal) instead. Returns the length written. Async-signal-safe: no allocation, no locks.
std::size_t format_stack(void* const* frames, int count, int first_number, bool exact_first,
                         char* out, std::size_t capacity);

// The same, as a string (allocates; not for signal handlers).
std::string format_stack(const std::vector<void*>& frames);

// The calling thread's stack, formatted, without the caller itself when skip = 0.
std::string current_stack(int skip = 0);

}  // namespace ddp::detail
