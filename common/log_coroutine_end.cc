#include "common/log_coroutine_end.h"

#include <spdlog/spdlog.h>

namespace ddprun {

void LogCoroutineEnd::operator()(const std::exception_ptr& error) const {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    spdlog::error("{} ended with an exception: {}", what, e.what());
  } catch (...) {
    spdlog::error("{} ended with an unknown exception", what);
  }
}

}  // namespace ddprun
