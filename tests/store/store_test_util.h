// Helpers for the store's socket tests: a StoreServer on its own thread and io_context (as the
// agent's loop would run it), and a small blocking TCPStore client that speaks either dialect
// through the codec. Every read has a deadline; nothing sleeps.
#pragma once

#include <chrono>
#include <cstdint>
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

#include "common/posix_fd.h"
#include "store/codec.h"
#include "store/server.h"
#include "tests/store/init_traffic.h"  // make()

namespace ddprun::store::testing {

using namespace std::chrono_literals;

// A StoreServer listening on 127.0.0.1:0, run by its own thread. Destruction closes it and
// joins the thread.
class StoreThread {
 public:
  explicit StoreThread(StoreServerOptions options = {}) : server_(io_, options) {
    Status s = server_.listen("127.0.0.1", 0);
    EXPECT_TRUE(s.ok()) << s.message();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~StoreThread() {
    boost::asio::post(io_, [this] {
      server_.close();
      work_.reset();
    });
    thread_.join();
  }
  uint16_t port() const { return server_.port(); }

  // Runs `f` on the server's loop and returns its result.
  template <class F>
  auto on_loop(F f) -> decltype(f(std::declval<StoreServer&>())) {
    std::packaged_task<decltype(f(std::declval<StoreServer&>()))()> task(
        [&] { return f(server_); });
    auto result = task.get_future();
    boost::asio::post(io_, [&] { task(); });
    return result.get();
  }
  StoreStats stats() {
    return on_loop([](StoreServer& s) { return s.stats(); });
  }
  // Polls stats() until `done` holds or 10 s pass (for effects of a peer's hang-up, which
  // reach the server asynchronously); true when it held.
  bool stats_until(const std::function<bool(const StoreStats&)>& done);

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
      io_.get_executor()};
  StoreServer server_;
  std::thread thread_;
};

// A blocking TCPStore client on loopback. Reads fail (nullopt) at the deadline or when the
// server closes the connection.
class TestClient {
 public:
  // Connects; in the validated dialect also sends VALIDATE (no reply expected).
  static std::unique_ptr<TestClient> connect(uint16_t port, Dialect dialect);

  Dialect dialect() const { return dialect_; }
  void send_raw(std::string_view bytes);
  void send(const Request& request) { send_raw(encode_request(request, dialect_)); }

  std::optional<std::string> read_exact(size_t n);
  std::optional<uint8_t> read_u8();
  std::optional<int64_t> read_i64();
  std::optional<std::string> read_value();  // u64 length + bytes
  // True when the server closes the connection (EOF or reset) before the deadline; any bytes
  // still arriving before that are discarded.
  bool wait_closed();

  // One query and its reply.
  void set(const std::string& key, const std::string& value);
  std::optional<std::string> get(const std::string& key);
  std::optional<int64_t> add(const std::string& key, int64_t delta);
  std::optional<std::string> compare_set(const std::string& key, const std::string& expected,
                                         const std::string& desired);
  std::optional<int64_t> num_keys();
  // Sends WAIT; true once STOP_WAITING arrives.
  bool wait(const std::vector<std::string>& keys);

  std::chrono::milliseconds timeout{10'000};  // per read

 private:
  TestClient(UniqueFd fd, Dialect dialect) : fd_(std::move(fd)), dialect_(dialect) {}
  UniqueFd fd_;
  Dialect dialect_;
};

}  // namespace ddprun::store::testing
