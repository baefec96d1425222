// SLURM's hostlist syntax, expanded: "gpu[01-04,07],login1" → gpu01 gpu02 gpu03 gpu04 gpu07
// login1. Written here rather than asking `scontrol show hostnames` (not on every node, a
// process per start) or linking libslurm (not a dependency we want for one function).
//
// The grammar, as SLURM writes SLURM_JOB_NODELIST:
//   list    := item ("," item)*            commas inside brackets do not separate items
//   item    := (text | "[" ranges "]")+    a name, with any number of bracket groups
//   ranges  := range ("," range)*
//   range   := digits | digits "-" digits  lo <= hi; lo's width (leading zeros) pads the numbers
// Several bracket groups in one item expand to their product, the leftmost varying slowest
// ("r[1-2]n[1-2]" → r1n1 r1n2 r2n1 r2n2). Names keep SLURM's order; duplicates are kept.
//
// Pure and bounded: no I/O; the input length, the number of hosts, a name's length and each
// number are checked against HostlistLimits before anything is allocated for them, so that any
// input (this is fuzzed) ends in a list or a clear error, never in a crash or a huge allocation.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ddprun::launcher {

struct HostlistLimits {
  std::size_t max_input = std::size_t{64} * 1024;  // bytes of hostlist text
  std::size_t max_hosts = 65536;  // names after expansion (SLURM's largest clusters fit)
  std::size_t max_name = 255;     // bytes of one host name (a DNS name's limit)
};

// Expands `text`. Errors (kind kInvalidArgument) say what is wrong and at which byte offset:
// an empty list or item, an unbalanced or nested bracket, an empty or malformed range, lo > hi,
// a number too long, a character that cannot be in a host name, or a limit exceeded.
Result<std::vector<std::string>> expand_hostlist(std::string_view text,
                                                 const HostlistLimits& limits = {});

}  // namespace ddprun::launcher
