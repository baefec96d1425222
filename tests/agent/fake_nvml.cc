// A fake NVML (libnvidia-ml.so.1) for tests: a shared object loaded by path
// (DDPRUN_NVML_LIBRARY), exporting the few functions ddprun resolves, with their real
// signatures. What it reports is read, at every call, from the file named by
// DDPRUN_FAKE_NVML_CONFIG, which a test writes and may rewrite between calls:
//
//   devices N                  N GPUs (default 0)
//   init_error CODE            nvmlInit_v2 fails with CODE
//   lost I                     GPU I has fallen off the bus: every query on it fails
//   ecc I COUNT                GPU I has COUNT uncorrectable ECC errors (volatile)
//   retired_pending I          GPU I has retired pages waiting for a reset
//   remap_pending I / remap_failed I
//   process I PID BYTES [N]    PID holds BYTES on GPU I; with N, only in the first N answers
//                              for GPU I since nvmlInit (memory released after N polls)
//
// No file: no GPU. With DDPRUN_FAKE_NVML_LOG, each process-list answer appends a line
// "answer <gpu> <processes listed>" to that file, so that a test sees when memory was released.
// Not thread-safe (neither are the tests that load it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kInsufficientSize = 7;
constexpr int kGpuIsLost = 15;

struct Process {
  unsigned gpu = 0;
  unsigned pid = 0;
  unsigned long long bytes = 0;  // NOLINT(google-runtime-int): NVML's type
  int polls = 0;                 // 0: always listed
};

struct Config {
  unsigned devices = 0;
  int init_error = 0;
  std::map<unsigned, bool> lost, retired_pending, remap_pending, remap_failed;
  std::map<unsigned, unsigned long long> ecc;  // NOLINT(google-runtime-int)
  std::vector<Process> processes;
};

Config read_config() {
  Config config;
  const char* path = std::getenv("DDPRUN_FAKE_NVML_CONFIG");
  if (path == nullptr) return config;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string key;
    unsigned index = 0;
    words >> key;
    if (key == "devices") {
      words >> config.devices;
    } else if (key == "init_error") {
      words >> config.init_error;
    } else if (key == "process") {
      Process p;
      words >> p.gpu >> p.pid >> p.bytes;
      if (!(words >> p.polls)) p.polls = 0;
      config.processes.push_back(p);
    } else if (words >> index) {
      if (key == "lost") config.lost[index] = true;
      if (key == "retired_pending") config.retired_pending[index] = true;
      if (key == "remap_pending") config.remap_pending[index] = true;
      if (key == "remap_failed") config.remap_failed[index] = true;
      if (key == "ecc") words >> config.ecc[index];
    }
  }
  return config;
}

std::map<unsigned, int> g_answers;  // process-list answers per GPU since nvmlInit_v2

// A device handle is its index + 1, so that null is never a valid one.
bool index_of(void* device, const Config& config, unsigned* index) {
  const auto value = reinterpret_cast<std::uintptr_t>(device);  // NOLINT: the fake's handles
  if (value == 0 || value > config.devices) return false;
  *index = static_cast<unsigned>(value - 1);
  return true;
}

struct ProcessInfo {  // nvmlProcessInfo_v2_t
  unsigned int pid;
  unsigned long long usedGpuMemory;  // NOLINT(google-runtime-int)
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

}  // namespace

// The exported names are NVML's own.
// NOLINTBEGIN(readability-identifier-naming)
extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  g_answers.clear();
  return read_config().init_error;
}

__attribute__((visibility("default"))) int nvmlShutdown() { return kSuccess; }

__attribute__((visibility("default"))) const char* nvmlErrorString(int code) {
  switch (code) {
    case kSuccess:
      return "Success";
    case kInvalidArgument:
      return "Invalid Argument";
    case kInsufficientSize:
      return "Insufficient Size";
    case 9:
      return "Driver Not Loaded";
    case kGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = read_config().devices;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                         void** device) {
  const Config config = read_config();
  if (index >= config.devices) return kInvalidArgument;
  if (config.lost.count(index)) return kGpuIsLost;
  *device = reinterpret_cast<void*>(static_cast<std::uintptr_t>(index) + 1);  // NOLINT
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetTotalEccErrors(
    void* device, int error_type, int counter_type,
    unsigned long long* count) {  // NOLINT(google-runtime-int)
  const Config config = read_config();
  unsigned index = 0;
  if (!index_of(device, config, &index) || error_type != 1 || counter_type != 0) {
    return kInvalidArgument;
  }
  if (config.lost.count(index)) return kGpuIsLost;
  auto it = config.ecc.find(index);
  *count = it == config.ecc.end() ? 0 : it->second;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetRetiredPagesPendingStatus(void* device,
                                                                                  int* pending) {
  const Config config = read_config();
  unsigned index = 0;
  if (!index_of(device, config, &index)) return kInvalidArgument;
  *pending = config.retired_pending.count(index) ? 1 : 0;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetRemappedRows(
    void* device, unsigned* corrected, unsigned* uncorrected, unsigned* pending, unsigned* failed) {
  const Config config = read_config();
  unsigned index = 0;
  if (!index_of(device, config, &index)) return kInvalidArgument;
  *corrected = 0;
  *uncorrected = 0;
  *pending = config.remap_pending.count(index) ? 1 : 0;
  *failed = config.remap_failed.count(index) ? 1 : 0;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v3(
    void* device, unsigned* count, ProcessInfo* infos) {
  const Config config = read_config();
  unsigned index = 0;
  if (!index_of(device, config, &index)) return kInvalidArgument;
  std::vector<ProcessInfo> listed;
  for (const Process& p : config.processes) {
    if (p.gpu != index || (p.polls > 0 && g_answers[index] >= p.polls)) continue;
    listed.push_back({p.pid, p.bytes, 0, 0});
  }
  if (listed.size() > *count) {
    *count = static_cast<unsigned>(listed.size());
    return kInsufficientSize;
  }
  ++g_answers[index];
  if (const char* log = std::getenv("DDPRUN_FAKE_NVML_LOG")) {
    std::ofstream(log, std::ios::app) << "answer " << index << " " << listed.size() << "\n";
  }
  *count = static_cast<unsigned>(listed.size());
  if (!listed.empty()) std::memcpy(infos, listed.data(), listed.size() * sizeof(ProcessInfo));
  return kSuccess;
}

}  // extern "C"
// NOLINTEND(readability-identifier-naming)
