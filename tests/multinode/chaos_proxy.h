// A TCP proxy for the chaos test: it sits between the agents and the rendezvous server on
// loopback and, at random, delays what it relays, stalls its reads (the sender's TCP buffers
// fill, as behind a congested link), cuts connections in the middle of a frame, and drops new
// connections at once. Faults come from a seeded generator and are bounded: each delay and
// stall has a maximum length, and cuts, stalls and drops a budget over the proxy's life, so a
// job behind it always gets through once the budget is spent.
//
// The same seed draws the same sequence of decisions; which connection each one hits depends
// on how the processes are scheduled, so a seed narrows a failure down but does not replay it.
//
// Threading: the proxy runs on a thread of its own from construction to destruction; counts()
// and wait_until() may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange without it

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "tests/integration/deadline.h"

namespace ddprun::testing {

// How much chaos. Probabilities are per chunk relayed (delay, cut), per read (stall) or per
// connection accepted (drop). Defaults suit a rendezvous whose heartbeat_timeout is a few
// seconds: every single fault is well within it.
struct ChaosOptions {
  uint64_t seed = 1;
  // A chunk is held this long at most before it goes on (order is kept). Not budgeted.
  double delay_probability = 0.3;
  std::chrono::milliseconds max_delay{60};
  // The relay stops reading one direction for up to max_stall.
  double stall_probability = 0.05;
  std::chrono::milliseconds max_stall{700};
  int max_stalls = 12;
  // A chunk is cut: a random prefix of it goes through, then both sides are closed.
  double cut_probability = 0.04;
  int max_cuts = 6;
  // A new connection is closed as soon as it is accepted; never two in a row, so a client's
  // next attempt gets through.
  double drop_probability = 0.5;
  int max_drops = 3;
};

// What the proxy did so far.
struct ChaosCounts {
  int connections = 0;  // relayed to the server
  int delays = 0;
  int stalls = 0;
  int cuts = 0;
  int drops = 0;
};

class ChaosProxy {
 public:
  // Listens on 127.0.0.1, port 0, and relays every connection to target_host:target_port,
  // from the client's own address (so the server sees 127.0.0.N as without the proxy).
  // Throws when it cannot listen.
  ChaosProxy(const std::string& target_host, uint16_t target_port, ChaosOptions options);
  // Stops the thread and closes every connection.
  ~ChaosProxy();
  ChaosProxy(const ChaosProxy&) = delete;
  ChaosProxy& operator=(const ChaosProxy&) = delete;

  uint16_t port() const { return port_; }
  ChaosCounts counts() const;
  // Waits until `enough` holds for the counts (checked on every change). False at the deadline.
  bool wait_until(const std::function<bool(const ChaosCounts&)>& enough, Deadline deadline) const;

 private:
  struct Link;

  boost::asio::awaitable<void> accept_loop();
  boost::asio::awaitable<void> serve(boost::asio::ip::tcp::socket client);
  boost::asio::awaitable<void> pump(std::shared_ptr<Link> link, bool to_server);
  boost::asio::awaitable<void> pause(std::chrono::milliseconds max);
  // Draws whether a fault of kind `field` happens now, within its budget, and counts it.
  bool fault(int ChaosCounts::*field, double probability, int budget);
  void count(int ChaosCounts::*field);

  const ChaosOptions options_;
  boost::asio::ip::tcp::endpoint target_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::mt19937_64 random_;     // proxy thread only
  bool last_dropped_ = false;  // proxy thread only
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  ChaosCounts counts_;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace ddprun::testing
