// The accelerators a worker started on this node would see: the devices installed
// (device_tree.h) narrowed by the visibility variables of each vendor's runtime
// (visible_devices.h), as torch counts them for torchrun's --nproc_per_node gpu|xpu|auto.
// docs/devices.md states the rules.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "agent/devices/device_tree.h"
#include "agent/devices/vendor.h"

namespace ddprun::agent::devices {

using Environment = std::map<std::string, std::string>;

// One vendor's devices on this node.
struct Accelerators {
  Vendor vendor = Vendor::kNvidia;
  int installed = 0;  // what its runtime shows with no visibility variable set
  int visible = 0;    // what it shows with the environment given
  // The variables that narrowed `installed` to `visible`, as "NAME=value" joined by spaces, for
  // messages; empty when none applied.
  std::string narrowed_by;
};

// Each vendor with at least one installed device, NVIDIA, AMD, Intel in that order (torch's
// preference among accelerators when more than one kind is built in), narrowed by `env`:
//   NVIDIA: CUDA_VISIBLE_DEVICES.
//   AMD: ROCR_VISIBLE_DEVICES over the installed GPUs, then HIP_VISIBLE_DEVICES (or, when that is
//     unset, CUDA_VISIBLE_DEVICES) over the GPUs ROCR left, both by CUDA's rule.
//   Intel: ZE_AFFINITY_MASK under ZE_FLAT_DEVICE_HIERARCHY (FLAT unless set).
// Pure.
std::vector<Accelerators> visible_accelerators(const InstalledDevices& installed,
                                               const Environment& env);

// visible_accelerators over the tree under `root` ("/" for this node).
std::vector<Accelerators> detect_accelerators(const std::filesystem::path& root,
                                              const Environment& env);

}  // namespace ddprun::agent::devices
