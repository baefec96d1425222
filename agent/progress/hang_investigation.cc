#include "agent/progress/hang_investigation.h"

#include <set>
#include <utility>

#include <spdlog/spdlog.h>

namespace ddprun::agent {
namespace {

bool stopping_or_read(RankActivity a) { return a == RankActivity::kStopping || activity_read(a); }

}  // namespace

HangInvestigation::HangInvestigation(Coordinator& coordinator, DeadlineTimer& timer,
                                     const Clock& clock, HangInvestigationOptions options)
    : coordinator_(coordinator), timer_(timer), clock_(clock), options_(options) {}

HangInvestigation::~HangInvestigation() { cancel(); }

void HangInvestigation::await_verdicts(std::vector<RankProgress> local, int world_size,
                                       Millis timeout, Done done) {
  await(std::move(local), world_size, timeout, &stopping_or_read, std::move(done));
}

void HangInvestigation::await_stacks(std::vector<RankProgress> local, int world_size,
                                     Millis timeout, Done done) {
  await(std::move(local), world_size, timeout, &activity_read, std::move(done));
}

void HangInvestigation::cancel() {
  ++generation_;
  timer_.cancel();
  done_ = nullptr;
}

void HangInvestigation::await(std::vector<RankProgress> local, int world_size, Millis timeout,
                              Ready ready, Done done) {
  cancel();
  coordinator_.share_progress(local, 0, nullptr);
  local_ = std::move(local);
  world_size_ = world_size;
  deadline_ = clock_.steady_now() + timeout;
  ready_ = ready;
  done_ = std::move(done);
  poll();
}

void HangInvestigation::poll() {
  const unsigned generation = generation_;
  coordinator_.job_progress([this, generation](Result<std::vector<RankProgress>> job) {
    if (generation != generation_ || !done_) return;
    // This node's ranks as it knows them now; the others' as they last shared them.
    std::vector<RankProgress> all = local_;
    std::set<int> known;
    for (const RankProgress& r : local_) known.insert(r.rank);
    if (job) {
      for (const RankProgress& r : *job) {
        if (known.insert(r.rank).second) all.push_back(r);
      }
    }
    int ready = 0;
    for (const RankProgress& r : all) ready += ready_(r.activity) ? 1 : 0;
    const bool expired = clock_.steady_now() >= deadline_;
    if (ready >= world_size_ || expired || !job) {
      if (!job) {
        spdlog::warn("hang detection: the other nodes' ranks are not known: {}",
                     job.error_message());
      } else if (ready < world_size_) {
        spdlog::warn("hang detection: {} of {} ranks reported in time; deciding without the rest",
                     ready, world_size_);
      }
      Done done = std::move(done_);
      done_ = nullptr;
      done(std::move(all));
      return;
    }
    timer_.arm(options_.poll_interval, [this, generation] {
      if (generation == generation_) poll();
    });
  });
}

}  // namespace ddprun::agent
