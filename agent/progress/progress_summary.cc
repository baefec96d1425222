#include "agent/progress/progress_summary.h"

#include <algorithm>

#include <fmt/format.h>

namespace ddprun::agent {

ProgressSummary summarize_progress(const std::vector<RankProgress>& ranks) {
  ProgressSummary s;
  s.ranks = static_cast<int>(ranks.size());
  for (const RankProgress& r : ranks) {
    if (!r.heartbeat_seen) {
      ++s.awaiting_first;
      continue;
    }
    if (r.last_step) {
      s.min_step = s.min_step ? std::min(*s.min_step, *r.last_step) : *r.last_step;
      s.max_step = s.max_step ? std::max(*s.max_step, *r.last_step) : *r.last_step;
    }
    const bool older =
        r.heartbeat_age > s.oldest_age ||
        (r.heartbeat_age == s.oldest_age && (!s.oldest_rank || r.rank < *s.oldest_rank));
    if (!s.oldest_rank || older) {
      s.oldest_rank = r.rank;
      s.oldest_age = r.heartbeat_age;
    }
  }
  return s;
}

namespace {

std::string steps_phrase(const ProgressSummary& s) {
  if (!s.min_step) return "";
  if (*s.min_step == *s.max_step) return fmt::format("step {}, ", *s.min_step);
  return fmt::format("steps {}-{}, ", *s.min_step, *s.max_step);
}

// "< 1 s", "2.1 s" under a minute (tenths, rounded down: it never shows more than it is),
// then whole seconds.
std::string age_phrase(Millis age) {
  if (age < Millis(1'000)) return "< 1 s";
  if (age < Millis(60'000)) {
    return fmt::format("{}.{} s", age.count() / 1000, (age.count() % 1000) / 100);
  }
  return fmt::format("{} s", age.count() / 1000);
}

}  // namespace

std::string describe(const ProgressSummary& s) {
  if (s.ranks == 0) return "";
  if (!s.oldest_rank) {
    return fmt::format("no heartbeat yet ({} rank{})", s.ranks, s.ranks == 1 ? "" : "s");
  }
  std::string line = steps_phrase(s) + "oldest heartbeat " + age_phrase(s.oldest_age);
  if (s.oldest_age >= Millis(1'000)) line += fmt::format(" (rank {})", *s.oldest_rank);
  if (s.awaiting_first > 0) {
    line += fmt::format("; {} rank{} without a heartbeat yet", s.awaiting_first,
                        s.awaiting_first == 1 ? "" : "s");
  }
  return line;
}

}  // namespace ddprun::agent
