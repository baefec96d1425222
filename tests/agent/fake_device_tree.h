// A node's accelerators as their drivers show them under /proc and /sys, written under a root
// directory of the test's own: what agent/devices/ reads, laid out as the kernel lays it out
// (PCI devices under sys/devices, DRM entries whose `device` and `driver` are symlinks, KFD
// topology nodes with their properties). Used by the device tests of tests/agent/ and
// tests/launcher/, and by the integration test that runs ddprun over such a tree.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

namespace ddprun::testing {

class FakeDeviceTree {
 public:
  explicit FakeDeviceTree(std::filesystem::path root) : root_(std::move(root)) {}

  const std::filesystem::path& root() const { return root_; }

  // /proc/driver/nvidia/gpus/<bus_id>/information naming `uuid` (none when empty).
  void add_nvidia_gpu(const std::string& bus_id, const std::string& uuid) {
    write(root_ / "proc/driver/nvidia/gpus" / bus_id / "information",
          fmt::format("Model: \t\t NVIDIA H100\nIRQ:   \t\t 42\n{}Bus Location: \t {}\n",
                      uuid.empty() ? "" : "GPU UUID: \t " + uuid + "\n", bus_id));
  }

  // The next KFD topology node: a CPU (no SIMDs) or a GPU with `unique_id` (0: not given).
  void add_kfd_cpu() { add_kfd_node(0, 0); }
  void add_kfd_gpu(std::uint64_t unique_id) { add_kfd_node(304, unique_id); }

  // A PCI device of `vendor` served by `driver`, with DRM entries card<card> and
  // renderD<render> (-1: none) and `xe_tiles` tile<K> directories (xe), `i915_gts` gt<K>
  // directories under its card (i915).
  void add_drm_device(const std::string& pci_address, unsigned vendor, const std::string& driver,
                      int card, int render, int xe_tiles = 0, int i915_gts = 0) {
    namespace fs = std::filesystem;
    const fs::path device = root_ / "sys/devices/pci0000:00" / pci_address;
    write(device / "vendor", fmt::format("{:#06x}", vendor));
    const fs::path driver_dir = root_ / "sys/bus/pci/drivers" / driver;
    fs::create_directories(driver_dir);
    fs::create_directory_symlink(driver_dir, device / "driver");
    for (int k = 0; k < xe_tiles; ++k) fs::create_directories(device / fmt::format("tile{}", k));
    for (const std::string& name :
         {card >= 0 ? fmt::format("card{}", card) : std::string(),
          render >= 0 ? fmt::format("renderD{}", render) : std::string()}) {
      if (name.empty()) continue;
      // The kernel's layout: the class entry points into the device's drm/ folder, whose
      // `device` leads back to the PCI device.
      const fs::path entry = device / "drm" / name;
      fs::create_directories(entry);
      fs::create_directory_symlink(device, entry / "device");
      fs::create_directories(root_ / "sys/class/drm");
      fs::create_directory_symlink(entry, root_ / "sys/class/drm" / name);
      if (name.rfind("card", 0) == 0) {
        for (int k = 0; k < i915_gts; ++k)
          fs::create_directories(entry / fmt::format("gt/gt{}", k));
      }
    }
  }

 private:
  static void write(const std::filesystem::path& file, const std::string& text) {
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }

  void add_kfd_node(int simd_count, std::uint64_t unique_id) {
    write(
        root_ / fmt::format("sys/class/kfd/kfd/topology/nodes/{}/properties", kfd_nodes_++),
        fmt::format("cpu_cores_count {}\nsimd_count {}\nmem_banks_count 1\n{}", simd_count ? 0 : 64,
                    simd_count, unique_id ? fmt::format("unique_id {}\n", unique_id) : ""));
  }

  std::filesystem::path root_;
  int kfd_nodes_ = 0;
};

}  // namespace ddprun::testing
