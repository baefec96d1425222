// The rendezvous server: hosts any number of jobs (isolated by job id) on one io_context.
//
// Embeddable: the agent builds it on its own io_context for --standalone and on the node that
// hosts the c10d-style endpoint; `ddp-rendezvous` runs it alone. All state has one owner: the
// given io_context, which must be run by exactly one thread (Asio's implicit strand).
//
// Usage:
//   RendezvousServer server(io, {});
//   if (Status s = server.listen("127.0.0.1", 0); !s) ...;
//   uint16_t port = server.port();
//   ...
//   server.shutdown([] { /* every connection closed */ });
//
// Not thread-safe: call every method on the io_context's thread (or before it runs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "common/listener.h"
#include "common/result.h"
#include "rendezvous/server/job_registry.h"
#include "rendezvous/server/server_counters.h"
#include "rendezvous/server/server_options.h"
#include "rendezvous/state/state_store.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

class Session;

struct ServerStats {
  size_t connections = 0;     // open now
  size_t jobs = 0;            // known now
  size_t excluded_hosts = 0;  // hosts kept out now (excluded_hosts.h)
  ServerCounters totals;      // since start
};

class RendezvousServer {
 public:
  // `clock` must outlive the server; tests may pass their own, production uses the default.
  RendezvousServer(boost::asio::io_context& io, ServerOptions options,
                   const Clock& clock = SystemClock::instance());
  // Closes every connection at once (no grace); prefer shutdown().
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // Binds and starts accepting. `address` is an IP literal or a host name; port 0 picks a free
  // port (read it with port()). Errors name the address and say why.
  Status listen(const std::string& address, uint16_t port);
  // The bound port; 0 before listen() succeeded.
  uint16_t port() const { return listener_.port(); }

  // Two-stage shutdown. Stage one: stop accepting, tell every client "server shutting down",
  // flush, let clients hang up. Stage two, after options.shutdown_grace: close the rest.
  // `done` runs on the io_context once every connection is gone. Idempotent.
  void shutdown(std::function<void()> done = {});

  ServerStats stats() const;
  // shutdown() has begun.
  bool stopping() const { return listener_.stopping(); }
  // Every job as it is now (status queries and metrics read the same view).
  std::vector<JobRegistry::JobView> jobs() const;
  // The hosts kept out of every job now, after a node of theirs left unfit (excluded_hosts.h),
  // and releasing one (true: it was kept out; saved to the state store, if any).
  std::vector<ExcludedHost> excluded_hosts() const { return registry_->excluded_hosts(); }
  bool release_host(const std::string& host) { return registry_->release_host(host); }

  // Durable state (--state-dir): loads the jobs `store` holds, whose nodes then have their
  // heartbeat_timeout to resume, and from now on records every decision there before any
  // client hears of it (decision_journal.h). `on_failure` runs once if a save fails (no
  // decision is sent after that). `store` must outlive the server. Call before listen(), or
  // while redirecting clients (a replica taking over: then call redirect_clients(nullopt)).
  Status restore_state(state::StateStore& store, std::function<void(const Status&)> on_failure);

  // ddp-rendezvous replicas (replica.h): while `to` is set, every client's Hello (or
  // StatusQuery) is answered with that Redirect and the connection closed; no job is served.
  // Setting it on a server that serves steps down: recording stops, every connection gets the
  // Redirect, and the jobs are dropped from memory (the next leader has them in the shared
  // store). nullopt (the default): serve.
  void redirect_clients(std::optional<Redirect> to);
  bool redirecting() const { return redirect_->has_value(); }

 private:
  // Makes the session for a socket the listener accepted (or refused, to say why).
  std::shared_ptr<ServedConnection> make_session(Listener::Accepted accepted);

  boost::asio::io_context& io_;
  const ServerOptions options_;
  const Clock& clock_;
  std::shared_ptr<ServerCounters> counters_ = std::make_shared<ServerCounters>();
  std::shared_ptr<JobRegistry> registry_;  // shared with sessions (see Session)
  // The server's; sessions read it (redirect_clients).
  std::shared_ptr<std::optional<Redirect>> redirect_ = std::make_shared<std::optional<Redirect>>();
  Listener listener_;  // after what sessions use: it closes them first when destroyed
};

}  // namespace ddprun::rdzv
