#include "common/descriptor_limit.h"

#include <spdlog/spdlog.h>

namespace ddprun {
namespace {
std::optional<rlimit> original_limit;
}  // namespace

uint64_t raise_descriptor_limit(uint64_t want) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      spdlog::debug("file descriptor limit raised from {} to {}", limit.rlim_cur, raised.rlim_cur);
      if (!original_limit) original_limit = limit;
      limit = raised;
    }
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < want) {
    spdlog::info(
        "file descriptor limit: {} (hard limit {}); the job's store holds a connection per "
        "rank, so a large job may run out of descriptors on this node: raise the hard limit "
        "(ulimit -Hn, LimitNOFILE= in a systemd unit) to at least {}",
        limit.rlim_cur, limit.rlim_max, want);
  }
  return limit.rlim_cur;
}

std::optional<rlimit> limit_for_children() { return original_limit; }

}  // namespace ddprun
