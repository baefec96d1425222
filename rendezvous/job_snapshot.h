// One job's durable state as bytes, for the StateStore (rendezvous/state): its round state
// (options, phase, round number, restart count, every node with its group rank and place in
// the round) and the membership token of each node. JSON, versioned ("v"), so that a daemon
// can read what an older one wrote and refuse what a newer one wrote. Enums are stored by name
// (format 2; format 1 stored integers and is still read), so reordering an enum changes nothing
// stored.
//
// Times do not survive a process (SteadyTime is per boot and per process), so a restored job
// restarts its clocks at `now`: every node is treated as disconnected and gets
// heartbeat_timeout to resume its membership; an open round's join and last-call timeouts
// and a running round's exit barrier start over.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "rendezvous/round_state.h"

namespace ddprun::rdzv {

struct JobSnapshot {
  std::optional<RoundState> round;         // nullopt: no node has joined yet
  std::map<std::string, uint64_t> tokens;  // node id -> membership token
  // node id -> the request id of the join that made it a member, so that the join sent again
  // by a node that never got its answer (the server was killed first) is answered again after
  // the restart instead of being taken for a restarted node (which restarts the job). Absent
  // in state written before it was kept ("join_requests" is optional in format 2).
  std::map<std::string, uint32_t> join_requests;
};

std::string encode_job_snapshot(const RoundState& round,
                                const std::map<std::string, uint64_t>& tokens,
                                const std::map<std::string, uint32_t>& join_requests = {});
// Errors (kMalformed, or kRefused for a newer format) name the job and what is wrong.
Result<JobSnapshot> decode_job_snapshot(const std::string& job_id, const std::string& bytes,
                                        SteadyTime now);

}  // namespace ddprun::rdzv
