#include "metrics/endpoint_flags.h"

namespace ddprun::metrics {

FlagInfo metrics_port_flag() {
  return {.name = "metrics_port",
          .type = ConfigType::kInteger,
          .help =
              "Serve /metrics (Prometheus) and /healthz on this port; 0 picks a free one "
              "(logged); default: off",
          .check = in_range(0, 65535)};
}

FlagInfo metrics_addr_flag() {
  // Anything but loopback exposes job information: the endpoint has no authentication.
  return {.name = "metrics_addr",
          .help =
              "Address of the metrics endpoint; anything but loopback exposes job "
              "information to the network",
          .default_text = "127.0.0.1"};
}

}  // namespace ddprun::metrics
