// Parsers for the values of ddprun's flags. Each returns a clear error naming what is wrong, of
// the invalid-argument kind (common/exit_codes.h: exit 2). Addresses: common/host_port.h.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/options.h"
#include "common/result.h"

namespace ddprun::launcher {

struct NodeRange {
  int min = 1;
  int max = 1;
};

// "N" or "MIN:MAX" with 0 < MIN <= MAX.
Result<NodeRange> parse_nnodes(const std::string& text);
// An integer > 0, or "cpu" (online cores), "gpu" (CUDA devices), "auto" (gpus, else cpus).
Result<int> parse_nproc_per_node(const std::string& text);
// torchrun's redirects/tee value: "0".."3", or a per-rank map "0:1,1:2".
Result<agent::PerRankStreams> parse_std_streams(const std::string& flag, const std::string& text);
// "0,1,2": local ranks, each >= 0.
Result<std::vector<int>> parse_rank_list(const std::string& flag, const std::string& text);
// --preload's modules, "torch,numpy": Python module names (dotted identifiers); at least one.
Result<std::vector<std::string>> parse_module_list(const std::string& text);
// "SIGTERM,SIGINT" (names with or without SIG, or numbers); errors name `flag`.
Result<std::vector<int>> parse_signal_list(const std::string& text,
                                           const std::string& flag = "--signals_to_handle");
// CUDA devices visible to workers: CUDA_VISIBLE_DEVICES when set, else the NVIDIA driver's
// device list. 0 on a machine without one.
int count_cuda_devices();

}  // namespace ddprun::launcher
