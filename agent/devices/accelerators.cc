#include "agent/devices/accelerators.h"

#include <optional>

namespace ddprun::agent::devices {
namespace {

std::optional<std::string> variable(const Environment& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

void note(std::string& narrowed_by, const char* name, const std::string& value) {
  if (!narrowed_by.empty()) narrowed_by += ' ';
  narrowed_by += std::string(name) + "=" + value;
}

Accelerators nvidia(const std::vector<ListedDevice>& gpus, const Environment& env) {
  Accelerators found{Vendor::kNvidia, static_cast<int>(gpus.size()), static_cast<int>(gpus.size()),
                     ""};
  if (auto list = variable(env, "CUDA_VISIBLE_DEVICES")) {
    found.visible = static_cast<int>(cuda_visible(*list, gpus).size());
    note(found.narrowed_by, "CUDA_VISIBLE_DEVICES", *list);
  }
  return found;
}

Accelerators amd(const std::vector<ListedDevice>& gpus, const Environment& env) {
  Accelerators found{Vendor::kAmd, static_cast<int>(gpus.size()), 0, ""};
  // ROCr (the HSA runtime) narrows first; HIP then numbers what is left from 0, so its list
  // indexes ROCR's survivors, not the installed GPUs.
  std::vector<ListedDevice> left = gpus;
  if (auto list = variable(env, "ROCR_VISIBLE_DEVICES")) {
    left = cuda_visible(*list, left);
    note(found.narrowed_by, "ROCR_VISIBLE_DEVICES", *list);
  }
  const char* hip_name = "HIP_VISIBLE_DEVICES";
  auto hip_list = variable(env, hip_name);
  if (!hip_list) {
    hip_name = "CUDA_VISIBLE_DEVICES";  // HIP reads CUDA's name when its own is unset
    hip_list = variable(env, hip_name);
  }
  if (hip_list) {
    left = cuda_visible(*hip_list, left);
    note(found.narrowed_by, hip_name, *hip_list);
  }
  found.visible = static_cast<int>(left.size());
  return found;
}

Accelerators intel(const std::vector<int>& tiles, const Environment& env) {
  const auto hierarchy_text = variable(env, "ZE_FLAT_DEVICE_HIERARCHY");
  const ZeHierarchy hierarchy = parse_ze_hierarchy(hierarchy_text.value_or(""));
  Accelerators found{Vendor::kIntel, level_zero_visible("", tiles, hierarchy), 0, ""};
  found.visible = found.installed;
  if (auto mask = variable(env, "ZE_AFFINITY_MASK")) {
    found.visible = level_zero_visible(*mask, tiles, hierarchy);
    if (hierarchy_text) note(found.narrowed_by, "ZE_FLAT_DEVICE_HIERARCHY", *hierarchy_text);
    note(found.narrowed_by, "ZE_AFFINITY_MASK", *mask);
  }
  return found;
}

}  // namespace

std::vector<Accelerators> visible_accelerators(const InstalledDevices& installed,
                                               const Environment& env) {
  std::vector<Accelerators> found;
  if (!installed.nvidia.empty()) found.push_back(nvidia(installed.nvidia, env));
  if (!installed.amd.empty()) found.push_back(amd(installed.amd, env));
  if (!installed.intel_tiles.empty()) found.push_back(intel(installed.intel_tiles, env));
  return found;
}

std::vector<Accelerators> detect_accelerators(const std::filesystem::path& root,
                                              const Environment& env) {
  return visible_accelerators(scan_installed_devices(root), env);
}

}  // namespace ddprun::agent::devices
