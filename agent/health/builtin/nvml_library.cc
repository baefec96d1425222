#include "agent/health/builtin/nvml_library.h"

#include <dlfcn.h>

#include <fmt/format.h>

namespace ddprun::agent::builtin {
namespace {

// nvml.h's types, as its ABI has them (nvml.h's names in the comments).
using DeviceHandle = void*;                              // DeviceHandle
enum MemoryErrorType : int { kUncorrectedErrors = 1 };   // MemoryErrorType
enum EccCounterType : int { kVolatileCount = 0 };        // EccCounterType
enum EnableState : int { kDisabled = 0, kEnabled = 1 };  // EnableState
// nvmlProcessInfo_v2_t, which nvmlDeviceGetComputeRunningProcesses_v2 and _v3 fill.
struct ProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // NOLINT(google-runtime-int): NVML's type
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NOLINT(google-runtime-int)

// A process list longer than this on one GPU is not believed (each entry is 24 bytes).
constexpr unsigned kMaxProcesses = 4096;

}  // namespace

struct NvmlLibrary::Symbols {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*device_count)(unsigned*) = nullptr;
  int (*device_by_index)(unsigned, DeviceHandle*) = nullptr;
  // The rest may be missing from an old driver: kNvmlFunctionNotFound.
  int (*total_ecc_errors)(DeviceHandle, MemoryErrorType, EccCounterType,
                          unsigned long long*) = nullptr;  // NOLINT(google-runtime-int)
  int (*retired_pages_pending)(DeviceHandle, EnableState*) = nullptr;
  int (*remapped_rows)(DeviceHandle, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  int (*compute_processes)(DeviceHandle, unsigned*, ProcessInfo*) = nullptr;
};

namespace {

template <class F>
void resolve(void* handle, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(handle, name));  // NOLINT: dlsym's void* to a function
}

}  // namespace

std::string nvml_library_path(const char* from_env) {
  return from_env != nullptr && *from_env != '\0' ? std::string(from_env) : kNvmlDefaultLibrary;
}

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::open(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return Status::unavailable(
        fmt::format("NVML could not be loaded ({}): {}", path, why ? why : "unknown error"));
  }
  auto symbols = std::make_unique<Symbols>();
  resolve(handle, "nvmlInit_v2", symbols->init);
  resolve(handle, "nvmlShutdown", symbols->shutdown);
  resolve(handle, "nvmlErrorString", symbols->error_string);
  resolve(handle, "nvmlDeviceGetCount_v2", symbols->device_count);
  resolve(handle, "nvmlDeviceGetHandleByIndex_v2", symbols->device_by_index);
  resolve(handle, "nvmlDeviceGetTotalEccErrors", symbols->total_ecc_errors);
  resolve(handle, "nvmlDeviceGetRetiredPagesPendingStatus", symbols->retired_pages_pending);
  resolve(handle, "nvmlDeviceGetRemappedRows", symbols->remapped_rows);
  resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3", symbols->compute_processes);
  if (symbols->compute_processes == nullptr) {  // drivers before R510: same struct
    resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v2", symbols->compute_processes);
  }
  const char* missing = symbols->init == nullptr              ? "nvmlInit_v2"
                        : symbols->shutdown == nullptr        ? "nvmlShutdown"
                        : symbols->error_string == nullptr    ? "nvmlErrorString"
                        : symbols->device_count == nullptr    ? "nvmlDeviceGetCount_v2"
                        : symbols->device_by_index == nullptr ? "nvmlDeviceGetHandleByIndex_v2"
                                                              : nullptr;
  if (missing != nullptr) {
    ::dlclose(handle);
    return Status::unavailable(fmt::format("NVML ({}) has no {}: too old a driver", path, missing));
  }
  if (const int code = symbols->init(); code != kNvmlSuccess) {
    const std::string why = symbols->error_string(code);
    ::dlclose(handle);
    return Status::unavailable(
        fmt::format("NVML ({}) could not be initialised: {} (code {})", path, why, code));
  }
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(path, handle, std::move(symbols)));
}

NvmlLibrary::NvmlLibrary(std::string path, void* handle, std::unique_ptr<Symbols> symbols)
    : path_(std::move(path)), handle_(handle), symbols_(std::move(symbols)) {}

NvmlLibrary::~NvmlLibrary() {
  symbols_->shutdown();
  ::dlclose(handle_);
}

std::string NvmlLibrary::error_string(int code) const {
  const char* text = symbols_->error_string(code);
  return text != nullptr ? text : fmt::format("NVML error {}", code);
}

int NvmlLibrary::device_count(unsigned* count) const { return symbols_->device_count(count); }

int NvmlLibrary::device(unsigned index, Device* device) const {
  return symbols_->device_by_index(index, device);
}

int NvmlLibrary::uncorrected_ecc_errors(Device device, uint64_t* count) const {
  if (symbols_->total_ecc_errors == nullptr) return kNvmlFunctionNotFound;
  unsigned long long value = 0;  // NOLINT(google-runtime-int): NVML's type
  const int code = symbols_->total_ecc_errors(device, kUncorrectedErrors, kVolatileCount, &value);
  *count = value;
  return code;
}

int NvmlLibrary::retired_pages_pending(Device device, bool* pending) const {
  if (symbols_->retired_pages_pending == nullptr) return kNvmlFunctionNotFound;
  EnableState state = kDisabled;
  const int code = symbols_->retired_pages_pending(device, &state);
  *pending = state == kEnabled;
  return code;
}

int NvmlLibrary::remapped_rows(Device device, bool* pending, bool* failed) const {
  if (symbols_->remapped_rows == nullptr) return kNvmlFunctionNotFound;
  unsigned corrected = 0;
  unsigned uncorrected = 0;
  unsigned is_pending = 0;
  unsigned failure = 0;
  const int code = symbols_->remapped_rows(device, &corrected, &uncorrected, &is_pending, &failure);
  *pending = is_pending != 0;
  *failed = failure != 0;
  return code;
}

int NvmlLibrary::compute_processes(Device device, unsigned index,
                                   std::vector<GpuProcess>* out) const {
  if (symbols_->compute_processes == nullptr) return kNvmlFunctionNotFound;
  // The list may grow between the size query and the read: ask again, a few times.
  std::vector<ProcessInfo> infos(16);
  for (int tries = 0; tries < 4; ++tries) {
    unsigned count = static_cast<unsigned>(infos.size());
    const int code = symbols_->compute_processes(device, &count, infos.data());
    if (code == kNvmlInsufficientSize && count <= kMaxProcesses) {
      infos.resize(count + 8);
      continue;
    }
    if (code != kNvmlSuccess) return code;
    for (unsigned i = 0; i < count && i < infos.size(); ++i) {
      GpuProcess process;
      process.gpu = index;
      process.pid = static_cast<pid_t>(infos[i].pid);
      if (infos[i].usedGpuMemory != kValueNotAvailable) process.used_bytes = infos[i].usedGpuMemory;
      out->push_back(process);
    }
    return kNvmlSuccess;
  }
  return kNvmlInsufficientSize;
}

}  // namespace ddprun::agent::builtin
