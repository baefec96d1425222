#include "launcher/metrics_service.h"

#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "metrics/process_metrics.h"
#include "rendezvous/server/server_metrics.h"

namespace ddprun::launcher {
namespace {

metrics::HttpEndpointOptions endpoint_options(const MetricsSettings& settings) {
  metrics::HttpEndpointOptions o;
  o.address = settings.address;
  o.port = settings.port.value_or(0);
  return o;
}

agent::AgentMetricsOptions agent_metrics_options(const agent::Agent& agent,
                                                 const std::string& job_id) {
  agent::AgentMetricsOptions o;
  o.job_id = job_id;
  o.store = [&agent] { return agent.store_host().server(); };
  // The ranks' progress exists only when heartbeats are read: without, no worker series.
  if (agent.watches_progress()) o.progress = [&agent] { return agent.rank_progress(); };
  return o;
}

}  // namespace

MetricsService::MetricsService(boost::asio::io_context& io, const MetricsSettings& settings,
                               agent::Agent& agent, const std::string& job_id)
    : agent_metrics_(registry_, agent_metrics_options(agent, job_id), SystemClock::instance()),
      endpoint_(
          io, endpoint_options(settings), [this] { return registry_.render(); },
          [this] { return agent_metrics_.health(); }) {
  metrics::add_process_collector(registry_);
  agent.add_observer(agent_metrics_);
}

Result<std::unique_ptr<MetricsService>> MetricsService::start(
    boost::asio::io_context& io, const MetricsSettings& settings, agent::Agent& agent,
    const std::string& job_id, const rdzv::RendezvousServer* hosted_server) {
  if (!settings.port) return std::unique_ptr<MetricsService>();
  std::unique_ptr<MetricsService> service(new MetricsService(io, settings, agent, job_id));
  if (hosted_server) rdzv::add_server_metrics(service->registry_, *hosted_server);
  if (Status s = service->endpoint_.listen(); !s) return s.with_context("--metrics_port");
  spdlog::info("serving metrics on http://{}:{}/metrics (health: /healthz)", settings.address,
               service->port());
  return service;
}

}  // namespace ddprun::launcher
