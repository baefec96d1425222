// Completion handler for co_spawn, for every coroutine of the project: our coroutines do not
// throw by design, but should one (std::bad_alloc), the error is logged with `what` instead of
// vanishing or escaping the io_context's run().
#pragma once

#include <exception>

namespace ddprun {

struct LogCoroutineEnd {
  const char* what;
  void operator()(const std::exception_ptr& error) const;
};

}  // namespace ddprun
