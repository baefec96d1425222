// One job's durable state as records for the StateStore (rendezvous/state): the job's record
// (options, phase, round number, restart count, failure) and one record per node (its place
// in the round, group rank, membership token, and the request id of the join that made it a
// member). JSON, versioned ("v"), so that a daemon can read what an older one wrote and
// refuse what a newer one wrote. Enums are stored by name, so reordering an enum changes
// nothing stored.
//
// Formats: 3 (written) is the job's record plus node records, so that a save writes only the
// nodes that changed (RoundState::take_changed_nodes; issue 25). 2 and 1 (read) kept every
// node inside the job's record; 1 stored enums as integers. A job read from format 1 or 2
// must be written whole once (JobSnapshot::whole_record).
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
#include "rendezvous/server/round_state.h"
#include "rendezvous/state/state_store.h"

namespace ddprun::rdzv {

struct JobSnapshot {
  std::optional<RoundState> round;         // nullopt: no node has joined yet
  std::map<std::string, uint64_t> tokens;  // node id -> membership token
  // node id -> the request id of the join that made it a member, so that the join sent again
  // by a node that never got its answer (the server was killed first) is answered again after
  // the restart instead of being taken for a restarted node (which restarts the job). Absent
  // in state written before it was kept.
  std::map<std::string, uint32_t> join_requests;
  bool whole_record = false;  // read from format 1 or 2: no node has a record of its own yet
};

// The job's record (format 3).
std::string encode_job_record(const RoundState& round);
// The record of `node_id`, which `round` must know; `token` / `join_request` 0: none.
std::string encode_node_record(const RoundState& round, const std::string& node_id, uint64_t token,
                               uint32_t join_request);
// The whole job as records: the job's and every node's.
state::StoredJob encode_job_snapshot(const RoundState& round,
                                     const std::map<std::string, uint64_t>& tokens,
                                     const std::map<std::string, uint32_t>& join_requests = {});
// Errors (kMalformed, or kRefused for a newer format) name the job, the record and what is
// wrong.
Result<JobSnapshot> decode_job_snapshot(const std::string& job_id, const state::StoredJob& stored,
                                        SteadyTime now);

}  // namespace ddprun::rdzv
