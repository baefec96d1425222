#include "common/logging.h"

#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_sinks.h>

namespace ddprun {

void init_logging(std::string_view name) {
  // A non-colour stderr sink: worker output shares the console, so our lines stay plain.
  auto logger = spdlog::stderr_logger_st(std::string(name) + "-log");
  logger->set_pattern(std::string("[") + std::string(name) + "] %^%l%$: %v");
  const char* level = std::getenv("DDPRUN_LOG_LEVEL");
  logger->set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace ddprun
