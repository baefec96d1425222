#include "ddp/error.h"

#include "stack_trace.h"

namespace ddp {
namespace {

std::string format(int rank, const std::string& operation, const std::string& detail) {
  std::string where = rank >= 0 ? "ddp rank " + std::to_string(rank) : std::string("ddp");
  return where + ": " + operation + ": " + detail;
}

}  // namespace

Error::Error(int rank, std::string operation, const std::string& detail, ErrorKind kind)
    : std::runtime_error(format(rank, operation, detail)),
      rank_(rank),
      operation_(std::move(operation)),
      kind_(kind) {
  // Raw addresses only (microseconds); names are looked up when someone asks.
  auto frames = std::make_shared<std::vector<void*>>(detail::kMaxStackFrames);
  frames->resize(static_cast<std::size_t>(
      detail::capture_stack(frames->data(), detail::kMaxStackFrames, /*skip=*/0)));
  frames_ = std::move(frames);
}

std::string Error::backtrace() const {
  return frames_ ? detail::format_stack(*frames_) : std::string();
}

}  // namespace ddp
