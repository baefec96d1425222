// The metrics endpoint's settings (--metrics-port, --metrics-addr), declared once for both
// programs' flag tables (launcher/launcher_flags.cc, rendezvous/daemon/daemon_flags.cc).
#pragma once

#include "common/flag_table.h"

namespace ddprun::metrics {

// An integer port; 0 picks a free one; unset (no default): no endpoint.
FlagInfo metrics_port_flag();
// Where the endpoint listens; default 127.0.0.1.
FlagInfo metrics_addr_flag();

}  // namespace ddprun::metrics
