// Parsers for the values of ddprun's flags. Each returns a clear error naming what is wrong, of
// the invalid-argument kind (common/exit_codes.h: exit 2). Addresses: common/host_port.h.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/devices/accelerators.h"
#include "agent/options.h"
#include "common/result.h"

namespace ddprun::launcher {

struct NodeRange {
  int min = 1;
  int max = 1;
};

// "N" or "MIN:MAX" with 0 < MIN <= MAX.
Result<NodeRange> parse_nnodes(const std::string& text);
// What --nproc_per_node comes to on a node.
struct NprocPerNode {
  int count = 1;  // workers on this node
  // The node's accelerators: those counted for gpu/xpu, else the first kind visible (what
  // --virtual-local-rank narrows for each worker). nullopt: none.
  std::optional<agent::devices::Vendor> accelerator;
};

// torch 2.x's values over the accelerators `found` (agent/devices/accelerators.h) and `cpus`
// online cores: an integer > 0; "cpu": the cores; "gpu": the NVIDIA, else AMD, GPUs visible
// (torch.cuda, which is HIP on ROCm); "xpu": the Intel GPUs visible; "auto": the first kind
// of accelerator visible, else the cores. gpu and xpu with none visible, and any other value,
// are errors naming the flag.
Result<NprocPerNode> resolve_nproc_per_node(const std::string& text,
                                            const std::vector<agent::devices::Accelerators>& found,
                                            int cpus);
// The same on this node: the device tree under device_root(), the process's environment.
Result<NprocPerNode> resolve_nproc_per_node(const std::string& text);
// resolve_nproc_per_node(text)'s count.
Result<int> parse_nproc_per_node(const std::string& text);
// Where this node's /proc and /sys are read for devices: "/", or DDPRUN_DEVICE_ROOT when set. That
// variable is a test seam (fabricated device trees for real ddprun runs), not a user setting.
std::filesystem::path device_root();
// torchrun's redirects/tee value: "0".."3", or a per-rank map "0:1,1:2".
Result<agent::PerRankStreams> parse_std_streams(const std::string& flag, const std::string& text);
// "0,1,2": local ranks, each >= 0.
Result<std::vector<int>> parse_rank_list(const std::string& flag, const std::string& text);
// --preload's modules, "torch,numpy": Python module names (dotted identifiers); at least one.
Result<std::vector<std::string>> parse_module_list(const std::string& text);
// "SIGTERM,SIGINT" (names with or without SIG, or numbers); errors name `flag`.
Result<std::vector<int>> parse_signal_list(const std::string& text,
                                           const std::string& flag = "--signals_to_handle");

}  // namespace ddprun::launcher
