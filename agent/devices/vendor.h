// Which maker's accelerators a node has: the runtime that numbers them and the visibility
// variables that runtime reads (docs/devices.md).
#pragma once

namespace ddprun::agent::devices {

enum class Vendor {
  kNvidia,  // CUDA: CUDA_VISIBLE_DEVICES
  kAmd,     // ROCm: ROCR_VISIBLE_DEVICES, then HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES
  kIntel,   // Level Zero (torch.xpu): ZE_AFFINITY_MASK, ZE_FLAT_DEVICE_HIERARCHY
};

// "NVIDIA", "AMD", "Intel".
inline const char* vendor_name(Vendor vendor) {
  switch (vendor) {
    case Vendor::kNvidia:
      return "NVIDIA";
    case Vendor::kAmd:
      return "AMD";
    case Vendor::kIntel:
      return "Intel";
  }
  return "unknown";
}

}  // namespace ddprun::agent::devices
