// Logging for the launcher, agent and daemons: spdlog to stderr, one line per message,
// prefixed with the program name so that it stands apart from worker output.
#pragma once

#include <string_view>

#include <spdlog/spdlog.h>

namespace ddprun {

// Sets up the default spdlog logger for program `name` ("ddprun", "ddp-rendezvous").
// The level comes from DDPRUN_LOG_LEVEL (trace|debug|info|warn|error|off), default info.
// Call once, early in main, before any other thread starts.
void init_logging(std::string_view name);

}  // namespace ddprun
