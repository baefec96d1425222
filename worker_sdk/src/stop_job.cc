#include "ddp/stop_job.h"

#include "worker_sdk/src/worker_notice.h"

namespace ddp {

void stop_job(const std::string& reason) noexcept {
  detail::tell_agent_and_exit("stop_job", "ddp::stop_job", reason, kExitDoNotRequeue);
}

}  // namespace ddp
