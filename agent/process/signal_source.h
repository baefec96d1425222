// The signals that end the job (--signals_to_handle), as the agent receives them. Behind an
// interface so that the agent's lifecycle tests deliver signals without raising them;
// AsioSignalSource is the real one.
#pragma once

#include <functional>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

namespace ddprun::agent {

class SignalSource {
 public:
  virtual ~SignalSource() = default;
  // Calls `on_signal` on the agent's loop for every handled signal from now on, including
  // those that arrived since the source was made, until stop().
  virtual void watch(std::function<void(int signo)> on_signal) = 0;
  virtual void stop() = 0;
};

// Catches `signals` from construction on (so that a signal that arrives before the agent runs
// is not lost), and ignores SIGPIPE: a closed console must not kill the agent (workers reset
// it). Use on `io`'s thread.
class AsioSignalSource final : public SignalSource {
 public:
  AsioSignalSource(boost::asio::io_context& io, const std::vector<int>& signals);
  void watch(std::function<void(int signo)> on_signal) override;
  void stop() override;

 private:
  void wait();

  boost::asio::signal_set set_;
  std::function<void(int)> on_signal_;
};

}  // namespace ddprun::agent
