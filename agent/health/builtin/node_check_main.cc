#include "agent/health/builtin/node_check_main.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "agent/health/builtin/gpu_check.h"
#include "agent/health/builtin/nic_check.h"
#include "agent/health/builtin/nvml_library.h"
#include "agent/health/builtin/path_check.h"
#include "agent/health/builtin/sysfs.h"

namespace ddprun::agent::builtin {
namespace {

// Printed as soon as known: when a later check hangs and is killed, these lines still reach
// the agent's failure message.
void print_problems(const CheckOutcome& outcome) {
  for (const std::string& problem : outcome.problems) {
    (void)std::fprintf(stdout, "%s: %s\n", outcome.check.c_str(), problem.c_str());
  }
  (void)std::fflush(stdout);
}

}  // namespace

std::vector<std::string> node_check_argv(const std::string& items, const std::string& node_address,
                                         const std::string& result_path) {
  return {"ddprun", std::string(kNodeCheckMode), items, node_address, result_path};
}

int run_node_check(const std::vector<std::string>& args) {
  if (args.size() != 3) {
    (void)std::fprintf(stderr, "usage: ddprun %s <items> <node address> <result file>\n",
                       std::string(kNodeCheckMode).c_str());
    return 2;
  }
  auto spec = parse_node_checks(args[0]);
  if (!spec) {
    (void)std::fprintf(stderr, "%s\n", spec.error_message().c_str());
    return 2;
  }
  const std::string root = sysfs_root(std::getenv(kSysfsRootEnv));
  std::vector<CheckOutcome> outcomes;
  // The quick checks first, the file systems (which may hang) last.
  if (spec->gpu) {
    outcomes.push_back(
        check_gpus(*spec->gpu, {nvml_library_path(std::getenv(kNvmlLibraryEnv)), root}));
    print_problems(outcomes.back());
  }
  if (spec->nic) {
    outcomes.push_back(check_nics(*spec->nic, args[1], root));
    print_problems(outcomes.back());
  }
  if (!spec->paths.empty()) {
    outcomes.push_back(check_paths(spec->paths));
    print_problems(outcomes.back());
  }
  std::ofstream(args[2]) << outcomes_to_json(outcomes) << "\n";
  for (const CheckOutcome& outcome : outcomes) {
    if (!outcome.passed()) return 1;
  }
  return 0;
}

}  // namespace ddprun::agent::builtin
