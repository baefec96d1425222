// builtin:gpu: every GPU of the node healthy. NVIDIA GPUs through NVML (nvml_library.h): none
// fallen off the bus, no uncorrectable ECC errors since the driver loaded, no retired pages or
// remapped rows waiting for a reset; AMD GPUs through sysfs (amd_gpu_check.h). gpu=N also wants
// exactly N GPUs. A node with neither NVML nor an AMD GPU fails, saying both.
//
// May block in the driver: runs in the check's child process (node_check_main.h).
#pragma once

#include <string>

#include "agent/health/builtin/check_outcome.h"
#include "agent/health/builtin/node_check_spec.h"

namespace ddprun::agent::builtin {

struct GpuCheckSources {
  std::string nvml_library;  // nvml_library_path(): libnvidia-ml.so.1 unless a test names one
  std::string sysfs_root;    // sysfs_root(): /sys unless a test names a fake tree
};

CheckOutcome check_gpus(const GpuCheckSpec& spec, const GpuCheckSources& sources);

}  // namespace ddprun::agent::builtin
