// The datagram ddp::stop_job sends on the worker channel (agent/process/worker_channel.h):
// {"event": "stop_job", "local_rank": r, "pid": p, "reason": "..."}, at most 8192 bytes (the
// reason is halved until it fits; invalid UTF-8 is replaced). Pure; LibTorch-free.
#pragma once

#include <string>

namespace ddp::detail {

std::string stop_job_notice(const std::string& reason, int local_rank, int pid);

}  // namespace ddp::detail
