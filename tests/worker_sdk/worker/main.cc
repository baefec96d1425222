#include <functional>
#include <iostream>
#include <thread>

#include "tests/worker_sdk/worker/worker.h"

namespace worker {

bool wait_for_file(const std::filesystem::path& path, std::chrono::seconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  // Polling: the file comes from another process, and the wait is bounded.
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void check_same_on_all_ranks(ddp::ProcessGroup& g, const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    for (const auto& other : g.all_gather(t.contiguous())) {
      CHECK_THAT(torch::equal(other, t), "ranks diverged");
    }
  }
}

}  // namespace worker

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: sdk_test_worker <scenario> [key=value...]\n";
    return 2;
  }
  const std::string scenario = argv[1];
  worker::Args args;
  for (int i = 2; i < argc; ++i) {
    std::string kv = argv[i];
    auto eq = kv.find('=');
    args[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  if (scenario == "throw" || scenario == "segfault" || scenario == "uncaught") {
    return worker::failure_scenario(scenario, args);
  }
  const std::map<std::string, std::function<int(worker::Group, const worker::Args&)>> scenarios = {
      {"collectives", worker::collectives},
      {"errors", worker::errors},
      {"destroy", worker::destroy},
      {"ddp", worker::ddp_modes},
      {"buffers", worker::buffers},
      {"rebuild", worker::rebuild},
      {"join", worker::join},
      {"heartbeat", worker::heartbeat},
      {"syncbn", worker::syncbn},
      {"powersgd_accuracy", worker::powersgd_accuracy},
      {"powersgd_torch", worker::powersgd_torch},
      {"resume", worker::resume},
      {"snapshot_kill_during_write", worker::snapshot_kill},
      {"snapshot_agree", worker::snapshot_agree},
      {"nccl", worker::nccl},
  };
  auto it = scenarios.find(scenario);
  if (it == scenarios.end()) {
    std::cerr << "unknown scenario " << scenario << "\n";
    return 2;
  }
  try {
    ddp::InitOptions init;
    // CPU tensors everywhere but in "nccl": Gloo, also where CUDA is visible (kAuto would
    // pick NCCL there).
    init.backend = scenario == "nccl" ? ddp::Backend::kNccl : ddp::Backend::kGloo;
    init.allow_single_process = scenario == "snapshot_kill_during_write";
    init.timeout = std::chrono::milliseconds(std::stoi(worker::arg(args, "timeout_ms", "30000")));
    auto group = ddp::init_process_group(init);
    const int code = it->second(group, args);
    if (code == 0 && ddp::default_group()) ddp::destroy_process_group();
    return code;
  } catch (const std::exception& e) {
    std::cerr << "sdk_test_worker " << scenario << " failed: " << e.what() << std::endl;
    return 1;
  }
}
