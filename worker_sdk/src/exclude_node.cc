#include "ddp/exclude_node.h"

#include "worker_sdk/src/worker_notice.h"

namespace ddp {

void exclude_node(const std::string& reason) noexcept {
  detail::tell_agent_and_exit("exclude_node", "ddp::exclude_node", reason, kExitNodeExcluded);
}

}  // namespace ddp
