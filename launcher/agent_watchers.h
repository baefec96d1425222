// The agent's observers that run_job owns, built from the launch config: the service manager's
// view of the node (systemd notify and watchdog: agent/service_status.h) and the signals
// forwarded to workers without ending the job (agent/process/signal_forwarder.h). With hang
// detection on, or Python workers reporting their own progress, the status line also shows the
// running ranks' progress (Agent::progress()). Build it before the agent, on the agent's loop, so
// that forwarded signals are caught from the start; attach it once the agent exists. It must
// outlive the agent.
#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>

#include "agent/agent.h"
#include "agent/process/signal_forwarder.h"
#include "agent/service_status.h"
#include "common/systemd_notifier.h"
#include "launcher/launch_config.h"

namespace ddprun::launcher {

struct AgentWatchers {
  AgentWatchers(boost::asio::io_context& io, agent::ProcessLauncher& launcher,
                const LaunchConfig& config)
      : notifier(make_service_notifier()),
        status(io, *notifier, config.rendezvous.job_id),
        forwarder(io, launcher, config.signals_to_forward),
        show_progress(config.agent.progress.hang_timeout > Millis(0) ||
                      config.agent.progress.auto_progress) {}
  void attach(agent::Agent& node_agent) {
    if (show_progress) {
      status.set_progress_query([&node_agent] { return node_agent.progress(); });
    }
    node_agent.add_observer(status);
    node_agent.add_observer(forwarder);
  }

  std::unique_ptr<ServiceNotifier> notifier;  // systemd's when NOTIFY_SOCKET is set, else none
  agent::ServiceStatus status;
  agent::SignalForwarder forwarder;
  bool show_progress;  // --hang_timeout set, or Python workers reporting their own progress
};

}  // namespace ddprun::launcher
