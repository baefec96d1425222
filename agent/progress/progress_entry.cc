#include "agent/progress/progress_entry.h"

namespace ddprun::agent {

rdzv::RankProgressEntry to_progress_entry(const RankProgress& r) {
  rdzv::RankProgressEntry e;
  e.rank = static_cast<uint32_t>(r.rank);
  e.local_rank = static_cast<uint32_t>(r.local_rank);
  e.step = r.last_step.value_or(-1);
  e.heartbeat_age_ms = static_cast<uint64_t>(r.heartbeat_age.count());
  e.heartbeat_seen = r.heartbeat_seen;
  e.activity = static_cast<uint8_t>(r.activity);
  e.where = r.where;
  // A rank that reports a busy time of 0 µs is measured all the same (1 µs): 0 means "none".
  if (r.busy) e.busy_us = std::max<uint64_t>(1, static_cast<uint64_t>(r.busy->count()));
  return e;
}

RankProgress from_progress_entry(const rdzv::RankProgressEntry& e, const std::string& node) {
  RankProgress r;
  r.rank = static_cast<int>(e.rank);
  r.node = node;
  r.local_rank = static_cast<int>(e.local_rank);
  if (e.step >= 0) r.last_step = e.step;
  r.heartbeat_age = Millis(static_cast<int64_t>(e.heartbeat_age_ms));
  r.heartbeat_seen = e.heartbeat_seen;
  r.activity = static_cast<RankActivity>(e.activity);  // the codec checked the range
  r.where = e.where;
  if (e.busy_us > 0) r.busy = std::chrono::microseconds(static_cast<int64_t>(e.busy_us));
  return r;
}

}  // namespace ddprun::agent
