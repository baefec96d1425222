// What ddp::stop_job and ddp::exclude_node share: one datagram to the agent on the worker channel
// (agent/process/worker_channel.h), {"event": "<event>", "local_rank": r, "pid": p, "reason":
// "..."}, at most 8192 bytes (the reason is halved until it fits; invalid UTF-8 is replaced),
// then the end of the process. LibTorch-free.
#pragma once

#include <string>

namespace ddp::detail {

// The datagram. Pure.
std::string worker_notice(const std::string& event, const std::string& reason, int local_rank,
                          int pid);

// Sends worker_notice(event, reason, LOCAL_RANK, getpid()) to $DDPRUN_WORKER_SOCKET without
// blocking; when there is no such variable, or the notice cannot be sent, writes
// "<caller>: <reason>" to stderr instead. Then flushes stdio and ends the process with
// `exit_code` (std::_Exit: no destructor or atexit handler runs; other threads, Gloo's and
// NCCL's, may still be running).
[[noreturn]] void tell_agent_and_exit(const char* event, const char* caller,
                                      const std::string& reason, int exit_code) noexcept;

}  // namespace ddp::detail
