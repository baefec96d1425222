#include "agent/health/builtin/gpu_check.h"

#include <fmt/format.h>

#include "agent/health/builtin/amd_gpu_check.h"
#include "agent/health/builtin/nvml_library.h"

namespace ddprun::agent::builtin {
namespace {

// Calls NVML's health queries on one GPU; a query the GPU does not support (ECC off, a
// consumer card, an older generation) says nothing about its health.
class NvidiaGpu {
 public:
  NvidiaGpu(const NvmlLibrary& nvml, unsigned index, NvmlLibrary::Device device,
            std::vector<std::string>& problems)
      : nvml_(nvml), index_(index), device_(device), problems_(problems) {}

  void check() {
    uint64_t ecc = 0;
    if (answered(nvml_.uncorrected_ecc_errors(device_, &ecc), "its ECC error count") && ecc > 0) {
      problem(fmt::format("{} uncorrectable ECC errors since the driver loaded", ecc));
    }
    bool pending = false;
    bool failed = false;
    if (answered(nvml_.retired_pages_pending(device_, &pending), "its retired pages") && pending) {
      problem("pages retired for memory errors wait for a GPU reset");
    }
    if (answered(nvml_.remapped_rows(device_, &pending, &failed), "its remapped rows")) {
      if (pending) problem("rows remapped for memory errors wait for a GPU reset");
      if (failed) problem("a row remapping failed: the GPU needs service");
    }
  }

 private:
  // True when the query answered; a lost GPU or an unexpected error is a problem.
  bool answered(int code, const char* what) {
    if (code == kNvmlSuccess) return true;
    if (code == kNvmlNotSupported || code == kNvmlFunctionNotFound) return false;
    if (lost_) return false;
    if (code == kNvmlGpuIsLost) {
      lost_ = true;
      problem(fmt::format("fallen off the bus (NVML: {})", nvml_.error_string(code)));
    } else {
      problem(fmt::format("NVML could not read {}: {} (code {})", what, nvml_.error_string(code),
                          code));
    }
    return false;
  }
  void problem(const std::string& what) {
    problems_.push_back(fmt::format("GPU {}: {}", index_, what));
  }

  const NvmlLibrary& nvml_;
  unsigned index_;
  NvmlLibrary::Device device_;
  std::vector<std::string>& problems_;
  bool lost_ = false;
};

// NVIDIA GPUs seen (0 without NVML), their problems appended; `nvml_error` says why NVML was
// not there.
unsigned check_nvidia(const std::string& library, std::vector<std::string>& problems,
                      std::string& nvml_error) {
  auto nvml = NvmlLibrary::open(library);
  if (!nvml) {
    nvml_error = nvml.error_message();
    return 0;
  }
  unsigned count = 0;
  if (const int code = (*nvml)->device_count(&count); code != kNvmlSuccess) {
    problems.push_back(fmt::format("NVML could not count the GPUs: {} (code {})",
                                   (*nvml)->error_string(code), code));
    return 0;
  }
  for (unsigned index = 0; index < count; ++index) {
    NvmlLibrary::Device device = nullptr;
    if (const int code = (*nvml)->device(index, &device); code != kNvmlSuccess) {
      problems.push_back(
          fmt::format("GPU {}: {} (NVML: {})", index,
                      code == kNvmlGpuIsLost ? "fallen off the bus" : "cannot be opened",
                      (*nvml)->error_string(code)));
      continue;
    }
    NvidiaGpu(**nvml, index, device, problems).check();
  }
  return count;
}

}  // namespace

CheckOutcome check_gpus(const GpuCheckSpec& spec, const GpuCheckSources& sources) {
  CheckOutcome outcome{"gpu", {}};
  std::string nvml_error;
  const unsigned nvidia = check_nvidia(sources.nvml_library, outcome.problems, nvml_error);
  AmdGpuFindings amd = check_amd_gpus(sources.sysfs_root);
  outcome.problems.insert(outcome.problems.end(), amd.problems.begin(), amd.problems.end());
  const int seen = static_cast<int>(nvidia) + amd.count;
  if (spec.expected_count && seen != *spec.expected_count) {
    outcome.problems.push_back(fmt::format(
        "{} GPUs seen ({} NVIDIA, {} AMD), expected {} (builtin:gpu={}){}", seen, nvidia, amd.count,
        *spec.expected_count, *spec.expected_count, nvml_error.empty() ? "" : "; " + nvml_error));
  } else if (seen == 0 && outcome.problems.empty()) {
    outcome.problems.push_back(fmt::format("no GPU seen: {}; no AMD GPU under {}/class/drm",
                                           nvml_error.empty() ? "NVML counts 0 GPUs" : nvml_error,
                                           sources.sysfs_root));
  }
  return outcome;
}

}  // namespace ddprun::agent::builtin
