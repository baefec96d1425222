// ddprun: a torchrun-compatible elastic launcher. See README.md.
#include <cstdio>
#include <string>
#include <vector>

#include "agent/process/process_hygiene.h"
#include "common/descriptor_limit.h"
#include "common/logging.h"
#include "launcher/command_line.h"
#include "launcher/run_job.h"

int main(int argc, char** argv) {
  ddprun::agent::ensure_standard_streams();
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
