// What a hung rank was doing when ddprun stopped it, read from what it printed on the way out.
//
// A hang stops every rank of a synchronous job: the one that stopped first and all the ranks
// that wait for it in a collective. Heartbeat ages cannot tell them apart (they all report the
// same step within microseconds); their stacks can. On SIGABRT a Python worker (given
// PYTHONFAULTHANDLER=1) prints every thread's stack, and a worker-SDK program prints a line
// saying whether it was inside a collective before its native backtrace. A rank that had already
// died of a peer's loss printed a Python traceback ending inside torch.distributed. This unit
// reads those texts; hang_detector.h decides culprits from the result.
//
// What counts as "waiting in a collective" for Python (the innermost frame of the main thread,
// which faulthandler lists last):
//   * a frame of torch.distributed (the c10d API, its logging wrappers, DDP's module in
//     torch/nn/parallel/distributed.py), except torch.distributed.elastic;
//   * autograd's backward (torch/autograd/, torch/_tensor.py): DDP's gradient all_reduce runs
//     there, so a rank waiting for a peer's gradients is in backward. A rank stuck computing its
//     own backward looks the same; when every rank looks like that, nobody is named (see
//     find_hang_culprits).
// A `work.wait()` on an async work handle from the training script itself shows the script's
// line, not torch's, and reads as "elsewhere": the report then names that rank with its frame.
//
// Pure: lines in, a finding out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddprun::agent {

// Also the stages of a hang's investigation across nodes (these values travel in the rendezvous
// protocol's rank progress, version 5): kUnknown until a verdict, kStopping once its node's
// verdict is in and before its stack is read, then one of the three findings.
enum class RankActivity : std::uint8_t {
  kUnknown = 0,       // not known (yet): no verdict on its node
  kInCollective = 1,  // waiting in a collective, a barrier or DDP's gradient sync: a victim
  kElsewhere = 2,     // in its own code: compute, I/O, a sleep, a lock, a data loader
  kStopping = 3,      // its node's verdict is in: it is being stopped so that it prints its stack
  kUnreadable = 4,    // stopped, and nothing it printed shows where it was
};
inline constexpr std::uint8_t kMaxRankActivity = 4;

// Whether its stack has been read (or found unreadable): a finding, not a stage.
inline bool activity_read(RankActivity a) {
  return a == RankActivity::kInCollective || a == RankActivity::kElsewhere ||
         a == RankActivity::kUnreadable;
}

// "unknown", "in a collective", "elsewhere", "stopping", "unreadable".
const char* activity_name(RankActivity activity);

struct ActivityFinding {
  RankActivity activity = RankActivity::kUnreadable;
  // The innermost frame that decided it, as "barrier at distributed_c10d.py:3152" (Python) or the
  // collective's name for SDK programs ("all_reduce"); empty when unreadable.
  std::string where;
};

// The activity shown by the latest readable stack dump or traceback in `lines` (a worker's
// stderr, oldest line first), except that a traceback ending inside torch.distributed (the
// rank's collective failed: a peer went away) makes it a rank in a collective whatever follows
// (a stack taken while it was tearing down). The SDK's marker lines:
//   *** ddp: waiting in a collective (<name>)        also "(<name>, which failed)"
//   *** ddp: not in a collective
ActivityFinding read_activity(const std::vector<std::string>& lines);

}  // namespace ddprun::agent
