// ddprun --metrics_port: the agent's metrics and health served over HTTP on the agent's loop.
// Owns the registry, the agent's metrics observer and the endpoint; the agent itself knows
// nothing of HTTP (it only reports to its observers).
//
// Not thread-safe: build it on the agent's io_context thread before the loop runs, and keep it
// until the loop has stopped.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "agent/agent.h"
#include "agent/agent_metrics.h"
#include "common/result.h"
#include "launcher/launch_config.h"
#include "metrics/http_endpoint.h"
#include "metrics/registry.h"

namespace ddprun::rdzv {
class RendezvousServer;
}

namespace ddprun::launcher {

class MetricsService {
 public:
  // Registers the metrics observer with `agent` and listens as `settings` say. nullptr when
  // settings.port is unset (metrics off); an error naming the address when it cannot listen.
  // `job_id` labels every series. `hosted_server`, when this node hosts the rendezvous, adds
  // its metrics (the daemon's) to the same endpoint.
  static Result<std::unique_ptr<MetricsService>> start(
      boost::asio::io_context& io, const MetricsSettings& settings, agent::Agent& agent,
      const std::string& job_id, const rdzv::RendezvousServer* hosted_server = nullptr);

  uint16_t port() const { return endpoint_.port(); }

 private:
  MetricsService(boost::asio::io_context& io, const MetricsSettings& settings, agent::Agent& agent,
                 const std::string& job_id);

  metrics::Registry registry_;
  agent::AgentMetrics agent_metrics_;
  metrics::HttpEndpoint endpoint_;
};

}  // namespace ddprun::launcher
