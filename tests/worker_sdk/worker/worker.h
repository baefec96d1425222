// The worker program of the SDK's multi-process tests. Started as N ranks (by the test
// harness, ddprun or torchrun), it runs one scenario and exits 0 when every check passed;
// on a failed check it prints what differs and exits 1. Scenarios, by file:
//   collectives.cc  collectives, errors, destroy
//   ddp.cc          ddp mode=<...>, buffers, rebuild, join, heartbeat
//   toolbox.cc      syncbn, powersgd_accuracy, powersgd_torch
//   resume.cc       resume, snapshot_kill_during_write, snapshot_agree
//   failures.cc     throw, segfault, uncaught (each makes one rank fail on purpose)
//   nccl.cc         nccl (CUDA tensors on an NCCL group; the others run on Gloo)
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ddp/ddp.h"

namespace worker {

using Args = std::map<std::string, std::string>;
using Group = std::shared_ptr<ddp::ProcessGroup>;

struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define CHECK_THAT(cond, what)                                                                 \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::ostringstream msg_;                                                                 \
      msg_ << "check failed at " << __FILE__ << ":" << __LINE__ << ": " #cond << ": " << what; \
      throw ::worker::CheckFailed(msg_.str());                                                 \
    }                                                                                          \
  } while (0)

inline std::string arg(const Args& args, const std::string& key, const std::string& fallback = "") {
  auto it = args.find(key);
  return it == args.end() ? fallback : it->second;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Polls for a file another rank creates, up to `deadline` (tests coordinate ranks with files).
bool wait_for_file(const std::filesystem::path& path, std::chrono::seconds deadline);

// Every rank must hold the same values: all-gathers and compares each tensor.
void check_same_on_all_ranks(ddp::ProcessGroup& g, const std::vector<at::Tensor>& tensors);

int collectives(Group g, const Args& args);
int errors(Group g, const Args& args);
int destroy(Group g, const Args& args);
int ddp_modes(Group g, const Args& args);
int buffers(Group g, const Args& args);
int rebuild(Group g, const Args& args);
int join(Group g, const Args& args);
int heartbeat(Group g, const Args& args);
int syncbn(Group g, const Args& args);
int powersgd_accuracy(Group g, const Args& args);
int powersgd_torch(Group g, const Args& args);
int resume(Group g, const Args& args);
int snapshot_kill(Group g, const Args& args);
int snapshot_agree(Group g, const Args& args);
int nccl(Group g, const Args& args);

// Failure scenarios run their own main (they end the process on purpose).
int failure_scenario(const std::string& scenario, const Args& args);

}  // namespace worker
