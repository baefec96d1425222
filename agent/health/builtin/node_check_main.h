// The built-in checks' own process. The agent runs them as it runs a user's check command:
// a child in its own process group, started through its ProcessLauncher, killed at
// --health_check_timeout. A file system whose stat never returns or a driver that wedges then
// holds up that child, never the agent's loop. The child is ddprun itself, started as
//
//   ddprun __node_check <items> <node address> <result file>
//
// It prints one line per problem on stdout (naming the device, interface or path and the
// value seen: the agent's failure message shows them), writes the outcomes as JSON to the
// result file (check_outcome.h: the agent's metrics), and exits 0 when every check passed,
// 1 when one did not, 2 on bad arguments.
//
// Tests point it at a fake NVML (DDPRUN_NVML_LIBRARY) and a fake /sys tree (DDPRUN_SYSFS_ROOT)
// through its environment.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ddprun::agent::builtin {

// argv[1] of the check's process.
inline constexpr std::string_view kNodeCheckMode = "__node_check";

// The argv that runs the checks `items` for a node advertising `node_address`.
std::vector<std::string> node_check_argv(const std::string& items, const std::string& node_address,
                                         const std::string& result_path);

// The check's process: `args` are what follows kNodeCheckMode. Returns its exit code.
int run_node_check(const std::vector<std::string>& args);

}  // namespace ddprun::agent::builtin
