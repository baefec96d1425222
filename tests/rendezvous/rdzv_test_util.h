// Helpers for rendezvous tests over real loopback sockets: a server on its own thread (like a
// separate host), simulated nodes (a RendezvousClient bound to its own 127.0.0.N), and bounded
// waits that run the test's io_context until a condition holds. No sleeps.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "rendezvous/client/client.h"
#include "rendezvous/server/server.h"
#include "tests/support/run_until.h"

namespace ddprun::rdzv::testing {

using namespace std::chrono_literals;

using ddprun::testing::run_until;  // tests/support

// A RendezvousServer running on its own thread and io_context; stopped and joined on
// destruction (two-stage shutdown, bounded by the server's grace).
class ServerThread {
 public:
  explicit ServerThread(ServerOptions options = test_options()) : server_(io_, options) {
    Status s = server_.listen("127.0.0.1", 0);
    EXPECT_TRUE(s.ok()) << s.message();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~ServerThread() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    boost::asio::post(io_, [this] { server_.shutdown([this] { work_.reset(); }); });
    thread_.join();
  }
  // Starts the two-stage shutdown without waiting; `done` runs on the server's thread.
  void shutdown_async(std::function<void()> done) {
    boost::asio::post(io_, [this, done = std::move(done)] { server_.shutdown(done); });
  }
  uint16_t port() const { return server_.port(); }
  // RendezvousServer::redirect_clients, on the server's thread; returns once it is in force.
  void redirect_clients(std::optional<Redirect> to) {
    std::promise<void> p;
    boost::asio::post(io_, [&] {
      server_.redirect_clients(std::move(to));
      p.set_value();
    });
    p.get_future().get();
  }
  ServerStats stats() {
    std::promise<ServerStats> p;
    boost::asio::post(io_, [&] { p.set_value(server_.stats()); });
    return p.get_future().get();
  }
  // Runs `f(server)` on the server's thread and returns its result.
  template <class F>
  auto on_loop(F f) {
    std::promise<decltype(f(server_))> p;
    boost::asio::post(io_, [&] { p.set_value(f(server_)); });
    return p.get_future().get();
  }
  static ServerOptions test_options() {
    ServerOptions o;
    o.handshake_timeout = 300ms;
    o.idle_timeout = 2s;
    o.shutdown_grace = 500ms;
    return o;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
      io_.get_executor()};
  RendezvousServer server_;
  std::thread thread_;
};

// One simulated node: its client and everything the client told it.
struct TestNode {
  std::unique_ptr<TcpRendezvousClient> client;
  std::optional<Status> connected;
  std::optional<Result<RoundAssignment>> assignment;
  std::vector<RendezvousEvent> events;

  template <class T>
  size_t count() const {
    size_t n = 0;
    for (const auto& e : events) n += std::holds_alternative<T>(e);
    return n;
  }
  template <class T>
  const T* last() const {
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (auto* e = std::get_if<T>(&*it)) return e;
    }
    return nullptr;
  }
};

inline ClientOptions node_options(uint16_t port, const std::string& job, int index) {
  ClientOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.job_id = job;
  o.local_address = "127.0.0." + std::to_string(1 + index % 250);  // a node per address
  o.connect_timeout = 3s;
  o.attempt_timeout = 1s;
  o.initial_backoff = 10ms;
  o.max_backoff = 100ms;
  o.keep_alive_interval = 50ms;
  o.heartbeat_timeout = 400ms;
  return o;
}

inline JoinRequest join_request(const std::string& node_id, uint32_t min, uint32_t max,
                                uint32_t max_restarts = 0) {
  JoinRequest r;
  r.node.node_id = node_id;
  r.node.local_world_size = 2;
  r.node.master_addr = "127.0.0.1";
  r.node.master_port = 29500;
  r.job.min_nodes = min;
  r.job.max_nodes = max;
  r.job.max_restarts = max_restarts;
  r.job.join_timeout = 2s;
  r.job.last_call_timeout = 100ms;
  r.job.heartbeat_timeout = 400ms;
  r.job.exit_barrier_timeout = 2s;
  return r;
}

// Creates a node and starts connecting it.
inline std::unique_ptr<TestNode> start_node(boost::asio::io_context& io, ClientOptions options) {
  auto node = std::make_unique<TestNode>();
  node->client = std::make_unique<TcpRendezvousClient>(io, std::move(options));
  TestNode* raw = node.get();
  node->client->set_event_handler([raw](const RendezvousEvent& e) { raw->events.push_back(e); });
  node->client->connect([raw](Status s) { raw->connected = s; });
  return node;
}

inline void start_join(TestNode& node, JoinRequest request) {
  node.assignment.reset();
  node.client->join(std::move(request),
                    [&node](Result<RoundAssignment> a) { node.assignment = std::move(a); });
}

}  // namespace ddprun::rdzv::testing
