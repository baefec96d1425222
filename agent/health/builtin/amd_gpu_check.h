// AMD GPUs through what amdgpu exposes in sysfs, the nearest thing to NVML's health queries
// that needs no ROCm library: each /sys/class/drm/card<N>/device with vendor 0x1002, its RAS
// counters (ras/umc_err_count: "ue: <n>" uncorrectable memory errors) and bad VRAM pages
// pending retirement (ras/gpu_vram_bad_pages lines flagged P). A GPU whose driver has no RAS
// support (consumer cards) is counted and not otherwise judged. Modest by design: no check of
// a lost GPU beyond its card directory being there.
#pragma once

#include <string>
#include <vector>

namespace ddprun::agent::builtin {

struct AmdGpuFindings {
  int count = 0;                      // AMD GPUs seen
  std::vector<std::string> problems;  // "AMD GPU card1: 2 uncorrectable memory errors (...)"
};

// Reads `sysfs_root`/class/drm. Never fails: what cannot be read is not judged.
AmdGpuFindings check_amd_gpus(const std::string& sysfs_root);

}  // namespace ddprun::agent::builtin
