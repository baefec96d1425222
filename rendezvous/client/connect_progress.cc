#include "rendezvous/client/connect_progress.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace ddprun::rdzv {
namespace {

constexpr Millis kLongestInterval{60'000};

long long whole_seconds(Millis d) { return std::max<long long>(0, (d.count() + 500) / 1000); }

}  // namespace

ConnectProgress::ConnectProgress(std::string endpoint, SteadyTime started, SteadyTime deadline)
    : endpoint_(std::move(endpoint)), started_(started), deadline_(deadline) {}

std::optional<std::string> ConnectProgress::failed(SteadyTime now, const std::string& error) {
  ++attempts_;
  const Millis waited = std::chrono::duration_cast<Millis>(now - started_);
  if (waited < next_report_) return std::nullopt;
  const Millis left = std::chrono::duration_cast<Millis>(deadline_ - now);
  std::string line;
  if (attempts_ == 1) {
    line = fmt::format("waiting for the rendezvous server at {}: {}; retrying for up to {} s",
                       endpoint_, error, whole_seconds(left));
  } else {
    line = fmt::format(
        "still waiting for the rendezvous server at {} after {} s ({} attempts); last error: {}; "
        "giving up in {} s",
        endpoint_, whole_seconds(waited), attempts_, error, whole_seconds(left));
  }
  if (attempts_ > 1) interval_ = std::min(interval_ * 2, kLongestInterval);
  next_report_ = waited + interval_;
  return line;
}

}  // namespace ddprun::rdzv
