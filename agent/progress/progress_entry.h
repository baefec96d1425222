// A rank's progress between the agent's form (RankProgress) and the wire's (RankProgressEntry):
// what a node shares with the rendezvous, and what it reads back of the others.
#pragma once

#include "agent/progress/rank_progress.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::agent {

rdzv::RankProgressEntry to_progress_entry(const RankProgress& rank);
// `node`: how the node is named (its advertised address).
RankProgress from_progress_entry(const rdzv::RankProgressEntry& entry, const std::string& node);

}  // namespace ddprun::agent
