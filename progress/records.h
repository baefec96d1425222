// The job's progress as records: each rank's as its node's agent last saw it, each node's as
// the rendezvous server holds it, and the stragglers found among them. What the agent (hang
// and straggler reports for one node), the rendezvous server (for many) and the wire protocol
// (rendezvous/wire/messages.h carries them) have in common; plain values, no behaviour.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddprun::progress {

// One rank's progress as its node's agent last saw it (hang detection, status).
struct RankProgressEntry {
  uint32_t rank = 0;
  uint32_t local_rank = 0;
  int64_t step = -1;              // last step it reported; -1: none yet
  uint64_t heartbeat_age_ms = 0;  // since its last heartbeat (or its start), when sent
  bool heartbeat_seen = false;    // it has sent a heartbeat at all
  // After a hang: what it was doing when stopped (agent::RankActivity: 0 not known, 1 waiting in
  // a collective, 2 elsewhere, 3 being stopped, 4 unreadable), and the frame that showed it
  // (at most 256 bytes).
  uint8_t activity = 0;
  std::string where;
  // Its mean busy time per step over its last steps (the time from the end of a step's
  // synchronisation to its arrival at the next one's), in microseconds; 0: it reports none.
  uint64_t busy_us = 0;
  bool operator==(const RankProgressEntry&) const = default;
};

// One node's progress as the server holds it (ProgressQuery's answer).
struct NodeProgress {
  std::string node_id;
  std::string host;  // the address it advertises (its master_addr offer)
  uint32_t group_rank = 0;
  std::vector<RankProgressEntry> ranks;  // ages as of the answer
  bool operator==(const NodeProgress&) const = default;
};

// A rank whose busy time per step is over the job's straggler threshold.
struct StragglerEntry {
  uint32_t rank = 0;
  uint32_t local_rank = 0;
  std::string node;      // the address its node advertises (as hang reports name nodes)
  uint64_t busy_us = 0;  // its mean busy time per step
  bool operator==(const StragglerEntry&) const = default;
};

// The job's stragglers, judged over every rank that reports its busy time
// (progress/stragglers.h). Progress's answer, and part of the status report.
struct StragglerFinding {
  uint32_t threshold_milli = 0;  // the threshold judged by; 0: not judged (no threshold)
  uint32_t ranks_measured = 0;   // ranks that reported a busy time
  uint64_t median_us = 0;        // their median busy time (the lower median); 0: none measured
  std::vector<StragglerEntry> stragglers;  // by rank
  bool operator==(const StragglerFinding&) const = default;
};

}  // namespace ddprun::progress
