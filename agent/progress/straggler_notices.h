// What a node says about the job's stragglers (progress/stragglers.h) as findings come in:
// a warning when a rank is first named, with its busy time and the job's median, and a line
// when it no longer is. Every node of a job gets the same findings from the rendezvous, so every
// node's log names the same ranks. A new attempt starts afresh (ranks may have moved).
//
// Not thread-safe: the agent's loop.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/wire/messages.h"

namespace ddprun::agent {

class StragglerNotices {
 public:
  // Logs what changed since the last finding; returns whether the set of stragglers did.
  bool update(const rdzv::StragglerFinding& finding);
  // Forgets the stragglers (a new attempt): they are named again when found again.
  void reset() { current_ = {}; }
  const rdzv::StragglerFinding& current() const { return current_; }
  // The last finding in one line, for the end of an attempt; empty when none came:
  //   stragglers: none over 1.5x the job's median busy time of 50 ms (4 ranks measured)
  //   stragglers: rank 3 (node b), rank 5 (node c) over 1.5x the job's median busy time ...
  std::string summary() const;

 private:
  rdzv::StragglerFinding current_;
};

}  // namespace ddprun::agent
