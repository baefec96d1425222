// Heartbeats: a worker tells its launcher that it is alive and how far it has got, so that
// a hung worker (stuck in a collective, a deadlock, a dead peer) can be told apart from a
// slow one.
//
//   ddp::heartbeat(step);   // each step (DistributedDataParallel does it by itself)
//   ddp::heartbeat();       // during long phases without steps (evaluation, data loading)
//   ddp::heartbeat(step, busy_seconds);  // with the rank's busy time in the step (stragglers)
//
// Contract (shared with the launcher)
// - When the environment variable DDPRUN_HEARTBEAT_FILE is set, each call writes the step as
//   decimal text followed by '\n' at offset 0 of that file (pwrite); a reader takes the text
//   up to the first '\n'. The file is opened once, lazily, on the first call
//   (O_WRONLY | O_CREAT | O_CLOEXEC); the variable is read at that moment.
// - heartbeat(step, busy_seconds) writes "<step> <busy_seconds>\n" (six decimals): how long the
//   rank was busy in the step, from the end of the previous step's synchronisation to its
//   arrival at this one's. The launcher compares ranks' busy times to name stragglers
//   (--straggler_threshold). A negative or non-finite busy time is left out.
// - heartbeat() without a step writes the last step again (0 before any step), which moves
//   the file's modification time.
// - Never throws and never blocks beyond that one write; a no-op when the variable is unset
//   or the file cannot be opened. Thread-safe.
// - DistributedDataParallel calls heartbeat(step) when a synchronised backward pass enters its
//   collectives (its first bucket's all-reduce), with step = the number of that pass (its
//   synchronised passes so far + 1) plus DistributedDataParallel::set_step_offset. Entering,
//   not finishing: a rank that hangs before a collective then shows the previous step while
//   the ranks waiting in that collective show this one, so the launcher can name it. From
//   its second pass on it adds its busy time: from the end of the previous pass's
//   synchronisation to this entry.
#pragma once

#include <cstdint>

#include "ddp/export.h"

namespace ddp {

DDP_API void heartbeat() noexcept;
DDP_API void heartbeat(std::int64_t step) noexcept;
DDP_API void heartbeat(std::int64_t step, double busy_seconds) noexcept;

}  // namespace ddp
