// builtin:path=/data[:min_free=SIZE]: a file system the job needs is there and answers. Each
// path is opened and listed (readable), a file is created in it, written, fsynced, read back and
// removed (writable), and, with min_free, statvfs's space available to this user is at least
// SIZE.
//
// Blocks as long as the file system does: a dead NFS or Lustre mount makes open or stat wait in
// the kernel, maybe forever. That is why it runs in the check's child process
// (node_check_main.h), which the agent kills at --health_check_timeout; the line it prints to
// stderr before each path names the one it hung on.
#pragma once

#include <vector>

#include "agent/health/builtin/check_outcome.h"
#include "agent/health/builtin/node_check_spec.h"

namespace ddprun::agent::builtin {

CheckOutcome check_paths(const std::vector<PathCheckSpec>& paths);

}  // namespace ddprun::agent::builtin
