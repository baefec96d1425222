#include "agent/devices/device_tree.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace ddprun::agent::devices {
namespace {

namespace fs = std::filesystem;

constexpr unsigned kAmdPciVendor = 0x1002;
constexpr unsigned kIntelPciVendor = 0x8086;

std::vector<std::string> read_lines(const fs::path& file) {
  std::vector<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The entries of `dir` whose names are `prefix` followed by a number, by that number.
std::map<unsigned long, fs::path> numbered_entries(const fs::path& dir, std::string_view prefix) {
  std::map<unsigned long, fs::path> entries;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    unsigned long number = 0;
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size();
    auto [ptr, parse_ec] = std::from_chars(first, last, number);
    if (parse_ec == std::errc() && ptr == last) entries.emplace(number, it->path());
  }
  return entries;
}

// A sysfs number such as "0x1002" or "304"; nullopt when absent or not a number.
std::optional<unsigned long long> read_number(const fs::path& file) {
  const std::vector<std::string> lines = read_lines(file);
  if (lines.empty()) return std::nullopt;
  std::string_view text = lines.front();
  int base = 10;
  if (text.rfind("0x", 0) == 0) {
    text.remove_prefix(2);
    base = 16;
  }
  unsigned long long value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || ptr == text.data()) return std::nullopt;
  return value;
}

std::vector<ListedDevice> nvidia_gpus(const fs::path& root) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (auto it = fs::directory_iterator(root / "proc/driver/nvidia/gpus", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    dirs.push_back(it->path());
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<ListedDevice> gpus;
  for (const fs::path& dir : dirs) {
    ListedDevice gpu;
    for (const std::string& line : read_lines(dir / "information")) {
      constexpr std::string_view kKey = "GPU UUID:";
      if (line.rfind(kKey, 0) != 0) continue;
      const std::size_t start = line.find_first_not_of(" \t", kKey.size());
      if (start != std::string::npos)
        gpu.uuid = line.substr(start, line.find_last_not_of(" \t") + 1 - start);
    }
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

// A KFD node's properties file: "name value" lines.
std::map<std::string, unsigned long long> kfd_properties(const fs::path& file) {
  std::map<std::string, unsigned long long> properties;
  for (const std::string& line : read_lines(file)) {
    const std::size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    unsigned long long value = 0;
    const char* last = line.data() + line.size();
    auto [ptr, ec] = std::from_chars(line.data() + space + 1, last, value);
    if (ec == std::errc()) properties[line.substr(0, space)] = value;
  }
  return properties;
}

// The DRM devices under <root>/sys/class/drm (cards and render nodes) of one PCI vendor, each
// PCI device once (its card and its render node lead to the same one), by PCI address. The
// value is the DRM entries that lead to it.
std::map<fs::path, std::vector<fs::path>> drm_devices(const fs::path& root, unsigned vendor) {
  std::map<fs::path, std::vector<fs::path>> devices;
  const fs::path drm = root / "sys/class/drm";
  for (std::string_view prefix : {"card", "renderD"}) {
    for (const auto& [number, entry] : numbered_entries(drm, prefix)) {
      if (read_number(entry / "device/vendor") != vendor) continue;
      std::error_code ec;
      fs::path device = fs::canonical(entry / "device", ec);
      if (ec) continue;
      devices[device].push_back(entry);
    }
  }
  return devices;
}

std::vector<ListedDevice> amd_gpus(const fs::path& root) {
  std::vector<ListedDevice> gpus;
  for (const auto& [number, node] :
       numbered_entries(root / "sys/class/kfd/kfd/topology/nodes", "")) {
    auto properties = kfd_properties(node / "properties");
    if (properties["simd_count"] == 0) continue;
    const unsigned long long unique_id = properties["unique_id"];
    gpus.push_back(ListedDevice{unique_id == 0 ? "" : fmt::format("GPU-{:016x}", unique_id)});
  }
  if (!gpus.empty()) return gpus;
  // No KFD topology (amdgpu without its compute interface listed): the render nodes.
  for (std::size_t i = 0; i < drm_devices(root, kAmdPciVendor).size(); ++i) gpus.emplace_back();
  return gpus;
}

std::vector<int> intel_gpus(const fs::path& root) {
  std::vector<int> tiles;
  for (const auto& [device, entries] : drm_devices(root, kIntelPciVendor)) {
    std::error_code ec;
    const std::string driver = fs::read_symlink(device / "driver", ec).filename().string();
    // Level Zero serves i915 and xe devices; an Intel display-only device has neither.
    if (ec || (driver != "i915" && driver != "xe")) continue;
    std::size_t count = numbered_entries(device, "tile").size();
    for (const fs::path& entry : entries) {
      count = std::max(count, numbered_entries(entry / "gt", "gt").size());
    }
    tiles.push_back(static_cast<int>(std::max<std::size_t>(count, 1)));
  }
  return tiles;
}

}  // namespace

InstalledDevices scan_installed_devices(const std::filesystem::path& root) {
  InstalledDevices installed;
  installed.nvidia = nvidia_gpus(root);
  installed.amd = amd_gpus(root);
  installed.intel_tiles = intel_gpus(root);
  return installed;
}

}  // namespace ddprun::agent::devices
