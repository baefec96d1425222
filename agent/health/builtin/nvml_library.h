// NVIDIA's management library (NVML), loaded at run time: ddprun never links it, and a node
// without it (no NVIDIA driver) is not an error unless a check asks for NVIDIA GPUs. Only the
// few calls the built-in GPU check and the restart's memory wait use are resolved; their types
// are declared here from NVML's public ABI (nvml.h), so no NVIDIA header is needed to build.
//
// Not thread-safe: one owner. Every call may block in the driver (NVML has no timeouts): the
// GPU check runs it in a child process that the agent bounds.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace ddprun::agent::builtin {

// nvmlReturn_t values this code tells apart (nvml.h).
enum NvmlReturn : int {
  kNvmlSuccess = 0,
  kNvmlNotSupported = 3,
  kNvmlInsufficientSize = 7,
  kNvmlFunctionNotFound = 13,
  kNvmlGpuIsLost = 15,  // the GPU has fallen off the bus
};

// The library loaded when nothing else is asked for.
inline constexpr const char* kNvmlDefaultLibrary = "libnvidia-ml.so.1";
// The variable that names another library: for tests (a fake NVML), documented as such.
inline constexpr const char* kNvmlLibraryEnv = "DDPRUN_NVML_LIBRARY";

// A process holding memory on a GPU, as NVML lists it.
struct GpuProcess {
  unsigned gpu = 0;  // device index
  pid_t pid = 0;
  std::optional<uint64_t> used_bytes;  // unset: NVML cannot say (NVML_VALUE_NOT_AVAILABLE)
};

class NvmlLibrary {
 public:
  using Device = void*;  // nvmlDevice_t

  // Loads `path` (dlopen: a bare name is searched for as the dynamic linker does) and
  // initialises NVML. The error says which library and why (not found, a symbol missing,
  // nvmlInit failing with NVML's own words).
  static Result<std::unique_ptr<NvmlLibrary>> open(const std::string& path);
  ~NvmlLibrary();  // nvmlShutdown, then unloads the library
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const std::string& path() const { return path_; }
  // NVML's words for a return code (nvmlErrorString).
  std::string error_string(int code) const;

  // Each returns NVML's code (NvmlReturn); a function this driver lacks answers
  // kNvmlFunctionNotFound.
  int device_count(unsigned* count) const;
  int device(unsigned index, Device* device) const;
  // Uncorrectable ECC errors since the driver loaded (volatile count).
  int uncorrected_ecc_errors(Device device, uint64_t* count) const;
  // Pages retired for errors and waiting for a reset to take effect (pre-Ampere GPUs).
  int retired_pages_pending(Device device, bool* pending) const;
  // Rows remapped and waiting for a reset, and a remapping that failed (Ampere and later).
  int remapped_rows(Device device, bool* pending, bool* failed) const;
  // The compute processes holding memory on `device` (index `index`, for GpuProcess::gpu).
  int compute_processes(Device device, unsigned index, std::vector<GpuProcess>* out) const;

 private:
  struct Symbols;
  NvmlLibrary(std::string path, void* handle, std::unique_ptr<Symbols> symbols);

  std::string path_;
  void* handle_;  // dlopen's; closed by the destructor
  std::unique_ptr<Symbols> symbols_;
};

// The NVML library to load, given the environment's value of kNvmlLibraryEnv (null or empty:
// the default).
std::string nvml_library_path(const char* from_env);

}  // namespace ddprun::agent::builtin
