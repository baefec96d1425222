#include "agent/process/signal_forwarder.h"

#include <spdlog/spdlog.h>

#include "agent/process/exit_status.h"

namespace ddprun::agent {

SignalForwarder::SignalForwarder(boost::asio::io_context& io, ProcessLauncher& launcher,
                                 const std::vector<int>& signals)
    : launcher_(launcher), signals_(io) {
  for (int signo : signals) signals_.add(signo);
  if (!signals.empty()) wait();
}

SignalForwarder::~SignalForwarder() {
  boost::system::error_code ignored;
  signals_.cancel(ignored);
}

void SignalForwarder::on_worker_started(int local_rank, pid_t pid) { running_.insert(pid); }

void SignalForwarder::on_worker_exited(int local_rank, pid_t pid, const ExitStatus& status) {
  // A stopped worker (job control) still runs; only an ended one leaves its group to be
  // released, after which the id must not be signalled any more.
  if (!status.stopped) running_.erase(pid);
}

void SignalForwarder::on_job_finished(int exit_code) {
  done_ = true;
  running_.clear();
  // Still caught (not reset to the default action, which would kill ddprun) until the
  // forwarder is destroyed: a late signal must not turn a finished job into a killed one.
}

void SignalForwarder::forward(int signo) {
  if (done_) return;
  if (running_.empty()) {
    spdlog::warn("received {}: no worker runs now, so it is not forwarded", signal_name(signo));
    return;
  }
  for (pid_t pgid : running_) launcher_.signal_group(pgid, signo);
  ++forwarded_;
  spdlog::info("received {}: forwarded to {} worker group{}; the job goes on", signal_name(signo),
               running_.size(), running_.size() == 1 ? "" : "s");
}

void SignalForwarder::wait() {
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (ec) return;  // cancelled
    forward(signo);
    wait();
  });
}

}  // namespace ddprun::agent
