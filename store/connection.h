// One TCPStore client connection: a reader coroutine that decodes queries from the buffered
// stream and applies them to the engine, and a writer coroutine that flushes replies.
//
// The dialect is decided by the connection's first bytes (codec.h). Anything the protocol does
// not allow (an unknown query type, a malformed or oversized query, a second VALIDATE, a write
// refused by the store's limits) closes this connection with a log line; the store and every
// other connection go on. When the connection ends, its pending wait and watches are dropped.
//
// Lifetime: owned by shared_ptr; both coroutines hold one, and so does the server's registry
// until `on_end` runs. Thread-safety: none; runs on the server's io_context.
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange without it
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/listener.h"
#include "store/engine.h"
#include "store/server_options.h"

namespace ddprun::store::detail {

// What the server and its connections share. Outlives the server object when connections end
// after it (they finish on the io_context).
struct SharedState {
  explicit SharedState(const StoreServerOptions& o) : options(o), engine(o.limits) {}
  const StoreServerOptions options;
  StoreEngine engine;
  StoreStats counters;  // only the counter fields; sizes come from the engine
};

class Connection final : public ServedConnection,
                         public StoreEngine::Client,
                         public std::enable_shared_from_this<Connection> {
 public:
  // `on_end` runs once, when the connection has ended.
  Connection(boost::asio::ip::tcp::socket socket, std::shared_ptr<SharedState> state,
             std::function<void()> on_end);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Spawns the reader and the writer on the socket's executor.
  void start() override;
  // Closes the socket now; the coroutines end, the engine forgets us, `on_end` runs.
  void close();
  // ServedConnection: TCPStore's protocol has no goodbye, so both stages close now.
  void close_gracefully(const std::string&) override { close(); }
  void close_now() override { close(); }

  // StoreEngine::Client: queue the bytes the client expects.
  void wait_done() override;
  void key_changed(const WatchEvent& event) override;

 private:
  boost::asio::awaitable<void> read_loop();
  boost::asio::awaitable<void> write_loop();
  // Decodes and applies every whole query in the buffer; false when the connection must close.
  bool process_input();
  Status handle(Request& request);          // counts it, then one of:
  Status handle_session(Request& request);  // validate, ping, wait, cancel_wait, watch_key
  Status handle_read(Request& request);
  Status handle_write(Request& request);
  void reply(std::string bytes);
  void drop(const std::string& why, uint64_t StoreStats::*counter);
  void arm_partial_timer();
  void finish();

  boost::asio::ip::tcp::socket socket_;
  std::shared_ptr<SharedState> state_;
  std::function<void()> on_end_;
  std::string peer_;  // "ip:port" for logs

  Dialect dialect_ = Dialect::kUnknown;
  bool validated_ = false;   // validated dialect: VALIDATE has been received
  std::vector<uint8_t> in_;  // bytes received and not yet decoded
  size_t need_ = 1;          // in_ must hold this many bytes before decoding can progress

  boost::asio::steady_timer wake_;           // wakes the writer when the outbox fills
  boost::asio::steady_timer partial_timer_;  // closes a connection stuck in a partial query
  std::deque<std::string> outbox_;
  size_t outbox_bytes_ = 0;
  bool open_ = true;
  bool finished_ = false;
};

}  // namespace ddprun::store::detail
