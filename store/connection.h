// One TCPStore client connection: a reader (a chain of read handlers) that decodes queries from
// the buffered stream and applies them to the engine. Replies are handed to the kernel at once (one
// send for every reply a read's queries produced; a reply another connection's write completes is
// sent when it is made); only what the socket's buffer cannot take waits for an asynchronous write.
//
// The dialect is decided by the connection's first bytes (codec.h). Anything the protocol does
// not allow (an unknown query type, a malformed or oversized query, a second VALIDATE, a write
// refused by the store's limits) closes this connection with a log line; the store and every
// other connection go on. When the connection ends, its pending wait and watches are dropped.
//
// Lifetime: owned by shared_ptr; the reader and an asynchronous write in flight hold one, and
// so does the server's registry until `on_end` runs. Thread-safety: none; runs on the server's
// io_context.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/listener.h"
#include "store/engine.h"
#include "store/read_buffer.h"
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

  // Starts the reader on the socket's executor.
  void start() override;
  // Closes the socket now; the reader ends, the engine forgets us, `on_end` runs.
  void close();
  // ServedConnection: TCPStore's protocol has no goodbye, so both stages close now.
  void close_gracefully(const std::string&) override { close(); }
  void close_now() override { close(); }

  // StoreEngine::Client: queue the bytes the client expects.
  void wait_done() override;
  void key_changed(const WatchEvent& event) override;

 private:
  // Reads what the client sends next; on_read decodes it and reads again, or ends.
  void read_more();
  void on_read(const boost::system::error_code& ec, size_t n);
  // Decodes and applies every whole query in the buffer; false when the connection must close.
  bool process_input();
  Status handle(Request& request);          // counts it, then one of:
  Status handle_session(Request& request);  // validate, ping, wait, cancel_wait, watch_key
  Status handle_read(Request& request);
  Status handle_write(Request& request);
  // Queues a reply; sends it at once unless the reader is still decoding (it sends them all).
  void reply(std::string_view bytes);
  // Gives the queued replies to the kernel, or to an asynchronous write for what it cannot
  // take now.
  void flush();
  void written(const boost::system::error_code& ec);
  void drop(const std::string& why, uint64_t StoreStats::*counter);
  void arm_partial_timer();
  void finish();
  // "ip:port" of the client, for logs (looked up when a log line needs it).
  std::string peer() const;

  boost::asio::ip::tcp::socket socket_;  // non-blocking: flush() sends without waiting
  std::shared_ptr<SharedState> state_;
  std::function<void()> on_end_;

  Dialect dialect_ = Dialect::kUnknown;
  bool validated_ = false;  // validated dialect: VALIDATE has been received
  ReadBuffer in_;           // bytes received and not yet decoded
  size_t need_ = 1;         // in_ must hold this many bytes before decoding can progress

  boost::asio::steady_timer partial_timer_;  // closes a connection stuck in a partial query
  bool partial_armed_ = false;               // partial_timer_ has a wait pending
  std::string outbox_;        // replies not yet given to the kernel (max_outbox_bytes)
  std::string sending_;       // the bytes of the asynchronous write in flight
  bool writing_ = false;      // an asynchronous write is in flight (it owns sending_)
  bool decoding_ = false;     // process_input() runs: replies wait for its one flush()
  bool peer_closed_ = false;  // the client hung up (no shutdown needed to tell it)
  bool open_ = true;
  bool finished_ = false;
};

}  // namespace ddprun::store::detail
