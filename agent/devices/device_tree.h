// The accelerators installed on a node, as their drivers list them under /proc and /sys, read
// under a root directory: "/" on a real node, a fabricated tree in tests. No visibility variable
// applies here (accelerators.h does that).
#pragma once

#include <filesystem>
#include <vector>

#include "agent/devices/visible_devices.h"

namespace ddprun::agent::devices {

struct InstalledDevices {
  // <root>/proc/driver/nvidia/gpus/<PCI bus id>: one directory per GPU the NVIDIA driver
  // serves; UUIDs from each one's `information` ("GPU UUID: GPU-…"). In bus-id order.
  std::vector<ListedDevice> nvidia;
  // <root>/sys/class/kfd/kfd/topology/nodes/<N>/properties with `simd_count` > 0 (CPU nodes
  // have 0), in node order, as ROCr numbers them; UUID "GPU-" + `unique_id` in 16 hex digits.
  // Without a KFD topology: the DRM devices (<root>/sys/class/drm/renderD<N>) of PCI vendor
  // 0x1002, without UUIDs.
  std::vector<ListedDevice> amd;
  // One entry per Intel GPU: a DRM device (card<N> or renderD<N>) of vendor 0x8086 served by
  // the i915 or xe driver, in PCI address order; the value is its tile count (xe: the PCI
  // device's tile<K> directories; i915: card<N>/gt/gt<K>), at least 1.
  std::vector<int> intel_tiles;
};

// Reads the trees under `root`. A part that is missing or unreadable counts no device: a node
// without a vendor's driver has none of its files.
InstalledDevices scan_installed_devices(const std::filesystem::path& root);

}  // namespace ddprun::agent::devices
