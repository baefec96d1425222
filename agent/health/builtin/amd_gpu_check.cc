#include "agent/health/builtin/amd_gpu_check.h"

#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "agent/health/builtin/sysfs.h"

namespace ddprun::agent::builtin {
namespace {

constexpr const char* kAmdVendor = "0x1002";

// card0, card1: not the connectors (card0-DP-1) nor render nodes.
bool is_card(const std::string& name) {
  if (name.rfind("card", 0) != 0 || name.size() == 4) return false;
  for (size_t i = 4; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  }
  return true;
}

void check_card(const std::string& card, const std::string& device, AmdGpuFindings& out) {
  const std::string where = fmt::format("AMD GPU {} ({})", card, device);
  for (const std::string& line : read_lines(device + "/ras/umc_err_count")) {
    if (line.rfind("ue:", 0) != 0) continue;
    const long long errors = std::strtoll(line.c_str() + 3, nullptr, 10);
    if (errors > 0) {
      out.problems.push_back(
          fmt::format("{}: {} uncorrectable memory errors (ras/umc_err_count)", where, errors));
    }
  }
  int pending = 0;
  for (const std::string& line : read_lines(device + "/ras/gpu_vram_bad_pages")) {
    // "0x00000001 : 0x00001000 : P": page, size, R(eserved) / P(ending) / F(ailed).
    const size_t flag = line.find_last_not_of(" \t");
    if (flag != std::string::npos && line[flag] == 'P') ++pending;
  }
  if (pending > 0) {
    out.problems.push_back(fmt::format(
        "{}: {} bad VRAM pages pending retirement (ras/gpu_vram_bad_pages; a reset is needed)",
        where, pending));
  }
}

}  // namespace

AmdGpuFindings check_amd_gpus(const std::string& sysfs_root) {
  AmdGpuFindings findings;
  const std::string drm = sysfs_root + "/class/drm";
  for (const std::string& name : list_directory(drm)) {
    if (!is_card(name)) continue;
    const std::string device = fmt::format("{}/{}/device", drm, name);
    if (read_attribute(device + "/vendor") != kAmdVendor) continue;
    ++findings.count;
    check_card(name, device, findings);
  }
  return findings;
}

}  // namespace ddprun::agent::builtin
