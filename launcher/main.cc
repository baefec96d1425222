// ddprun: a torchrun-compatible elastic launcher. See README.md.
#include <cstdio>
#include <string>
#include <vector>

#include "agent/health/builtin/node_check_main.h"
#include "agent/process/process_hygiene.h"
#include "common/descriptor_limit.h"
#include "common/logging.h"
#include "launcher/command_line.h"
#include "launcher/run_job.h"

int main(int argc, char** argv) {
  ddprun::agent::ensure_standard_streams();
  // The built-in health checks' own process, which the agent starts as a child of its own.
  if (argc > 1 && argv[1] == ddprun::agent::builtin::kNodeCheckMode) {
    return ddprun::agent::builtin::run_node_check(std::vector<std::string>(argv + 2, argv + argc));
  }
  ddprun::init_logging("ddprun");
  auto parsed =
      ddprun::launcher::parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.config) {
    (void)std::fprintf(parsed.exit_code == 0 ? stdout : stderr, "%s\n", parsed.output.c_str());
    return parsed.exit_code;
  }
  // The agent hosts the job's store: one connection per rank (see descriptor_limit.h).
  ddprun::raise_descriptor_limit();
  return ddprun::launcher::run_job(*parsed.config);
}
