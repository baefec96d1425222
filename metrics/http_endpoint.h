// The HTTP side of metrics: a small HTTP/1.1 server (Boost.Beast) on the owner's io_context.
//
//   GET /metrics   200, text/plain; version=0.0.4: the metrics handler's text (Prometheus
//                  scrapes this)
//   GET /healthz   200 "ok", or 503 with the reason the health handler gives
//   other paths    404; other methods 405 (Allow: GET)
//
// One coroutine per connection (keep-alive supported). Every read has a deadline (a request
// must arrive whole within read_timeout; an idle keep-alive connection is closed after it);
// requests are bounded (431 / 413 beyond max_request_bytes, 400 for anything unparseable);
// a connection beyond max_connections gets a 503 and is closed. Accepting, limits and running
// out of descriptors are the common Listener's (common/listener.h); sockets are close-on-exec,
// so workers the agent forks never inherit them.
//
// Security: there is no authentication. The default address is loopback; listening on any
// other address exposes job information (job ids, node counts, store activity) to whoever can
// reach that port.
//
// Threading: none. Construct, listen and close on the io_context's thread (or before it runs);
// handlers run on that thread and must not block. Nothing here blocks the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "common/listener.h"
#include "common/result.h"

namespace ddprun::metrics {

struct HttpEndpointOptions {
  // Address to listen on (an IP literal or a host name). Default 127.0.0.1: anything else
  // exposes job information to the network.
  std::string address = "127.0.0.1";
  // TCP port; 0 picks a free one (read it with port() after listen()). Default 0.
  uint16_t port = 0;
  // Largest request head (request line and headers), and largest body, accepted. Default 8 KiB.
  uint32_t max_request_bytes = 8192;
  // A request must arrive whole within this, and a response be written within it; an idle
  // keep-alive connection is closed after it. Default 10 s (Prometheus' default scrape timeout).
  Millis read_timeout{10'000};
  // Connections beyond this many get a 503 and are closed. Default 32.
  size_t max_connections = 32;
  // Listen backlog. Default 64.
  int backlog = 64;
};

class HttpEndpoint {
 public:
  // The body of GET /metrics, rendered when asked.
  using MetricsHandler = std::function<std::string()>;
  // GET /healthz: ok → 200 "ok"; an error → 503 with its message.
  using HealthHandler = std::function<Status()>;

  HttpEndpoint(boost::asio::io_context& io, HttpEndpointOptions options, MetricsHandler metrics,
               HealthHandler health);
  // close().
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // Binds options.address:options.port (SO_REUSEADDR) and starts accepting. Errors name the
  // address and the failing step. Once only.
  Status listen();
  // The bound port; 0 before listen() succeeded.
  uint16_t port() const { return listener_.port(); }
  const ListenerCounters& accept_counters() const { return listener_.counters(); }
  // Stops accepting and closes every connection now; handlers are not called afterwards.
  // Idempotent.
  void close();
  // Connections open now.
  size_t connections() const;

  struct Shared;  // state shared with connection coroutines (they may outlive the endpoint)

 private:
  const HttpEndpointOptions options_;
  std::shared_ptr<Shared> shared_;
  Listener listener_;
};

}  // namespace ddprun::metrics
