// Fault injection for the SDK's own tests. Not installed, not part of the API: programs never
// call these.
#pragma once

#include <filesystem>
#include <functional>

namespace ddp::detail::testing {

// Called on rank 0 once a snapshot's temp file is durable, just before the rename that
// publishes it (tests SIGKILL the writer there). Empty to remove.
void set_before_snapshot_rename(std::function<void(const std::filesystem::path&)> hook);

}  // namespace ddp::detail::testing
