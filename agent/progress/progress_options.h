// What the agent watches of its workers' progress, and what it does about it: hangs (a rank
// silent too long is stopped), stragglers (a rank whose busy time per step is over the job's
// median by a threshold is named), heartbeats read from Python workers without their help, and
// torch's file-based timer. Filled by the launcher from --hang_timeout,
// --first_heartbeat_timeout, --straggler_threshold, --no_auto_progress and
// TORCHELASTIC_ENABLE_FILE_TIMER; read by HangWatch (hang_watch.h).
#pragma once

#include <cstdint>

#include "common/clock.h"

namespace ddprun::agent {

struct ProgressOptions {
  // --hang_timeout: a rank that sent a heartbeat and then none for this long is hung. 0: off
  // (the default).
  Millis hang_timeout{0};
  // --first_heartbeat_timeout: the longest a rank may take to its first heartbeat (start-up,
  // data loading); never shorter than hang_timeout. 0 (the default): a rank that never sends a
  // heartbeat is not stopped for that alone (a program without the SDK, a script whose steps
  // torch's hooks do not see); the launcher says so at start.
  Millis first_heartbeat_timeout{0};
  // TORCHELASTIC_ENABLE_FILE_TIMER=1: serve torch's FileTimerClient pipe, as torchrun does.
  bool file_timer = false;
  // --straggler_threshold in thousandths (progress/stragglers.h); 0 (the default): off. When
  // set, heartbeats are watched (for their busy times) and shared even without hang detection.
  uint32_t straggler_threshold_milli = 0;
  bool judge_stragglers() const { return straggler_threshold_milli > 0; }
  // Python workers report their own steps and busy times (agent/python/, DDPRUN_AUTO_PROGRESS_
  // FILE), so their progress is read for every Python job: metrics, status lines and the
  // rendezvous's status show each rank's step. The launcher sets it for Python entry points
  // unless --no_auto_progress. Default false.
  bool auto_progress = false;
  // --max_no_progress_restarts: this many attempts in a row failing without any rank getting
  // past the highest step reached ends the job, not restartable (exit 79; restart_guard.h).
  // Heartbeats are then read for the steps. 0 (the default): off.
  uint32_t max_no_progress_restarts = 0;
};

}  // namespace ddprun::agent
