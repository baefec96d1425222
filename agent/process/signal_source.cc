#include "agent/process/signal_source.h"

#include <csignal>

namespace ddprun::agent {

AsioSignalSource::AsioSignalSource(boost::asio::io_context& io, const std::vector<int>& signals)
    : set_(io) {
  for (int signo : signals) set_.add(signo);
  (void)std::signal(SIGPIPE, SIG_IGN);
}

void AsioSignalSource::watch(std::function<void(int signo)> on_signal) {
  on_signal_ = std::move(on_signal);
  wait();
}

void AsioSignalSource::stop() {
  on_signal_ = nullptr;
  boost::system::error_code ignored;
  set_.cancel(ignored);
}

void AsioSignalSource::wait() {
  set_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (ec || !on_signal_) return;
    on_signal_(signo);
    if (on_signal_) wait();
  });
}

}  // namespace ddprun::agent
