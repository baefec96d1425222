// The answer to a status query (ddp-rendezvous status): the server's jobs as a StatusReport
// message, built from the registry's snapshot. Pure: snapshot and time in, message out.
//
// Bounded: the report's frame never exceeds `max_frame_bytes` (the peer's frame limit, the
// same as the server's by default). Jobs, and nodes within a job, that would not fit are left
// out and `truncated` is set; jobs come in job-id order, nodes by group rank. The hosts kept
// out (excluded_hosts.h) follow the jobs, by host name, within what is left of the frame.
#pragma once

#include <cstdint>
#include <vector>

#include "common/clock.h"
#include "rendezvous/server/excluded_hosts.h"
#include "rendezvous/server/job_registry.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

StatusReport build_status_report(const std::vector<JobRegistry::JobView>& jobs, SteadyTime now,
                                 uint32_t max_frame_bytes,
                                 const std::vector<ExcludedHost>& excluded = {});

// The phase a job's snapshot is in (kNoRound before its first join).
JobPhase job_phase(const JobRegistry::JobView& job);

}  // namespace ddprun::rdzv
