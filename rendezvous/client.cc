#include "rendezvous/client.h"

#include <deque>
#include <random>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "rendezvous/connector.h"
#include "rendezvous/frame_io.h"

namespace ddprun::rdzv {

ClientOptions ClientOptions::from_conf(const RendezvousConf& conf, std::string host, uint16_t port,
                                       std::string job_id) {
  ClientOptions o;
  o.host = std::move(host);
  o.port = port;
  o.job_id = std::move(job_id);
  o.connect_timeout = conf.join_timeout;
  o.attempt_timeout = std::min(conf.read_timeout, Millis(10'000));
  o.request_timeout = conf.read_timeout;
  o.keep_alive_interval = conf.keep_alive_interval;
  o.heartbeat_timeout = conf.heartbeat_timeout;
  return o;
}

namespace {

// Names a request in error messages: "join", "kv get", ...
std::string describe(const ClientMessage& message) {
  return std::visit(
      [](const auto& m) -> std::string {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, JoinMsg>) return "join";
        if constexpr (std::is_same_v<M, ReportFailureMsg>) return "the worker-failure report";
        if constexpr (std::is_same_v<M, ReportSuccessMsg>) return "the success report";
        if constexpr (std::is_same_v<M, LeaveMsg>) return "leave";
        if constexpr (std::is_same_v<M, KvMsg>) {
          switch (m.op) {
            case KvOp::kSet:
              return "kv set";
            case KvOp::kGet:
              return "kv get";
            case KvOp::kAdd:
              return "kv add";
            case KvOp::kCompareSet:
              return "kv compare_set";
            case KvOp::kWait:
              return "kv wait";
            case KvOp::kDelete:
              return "kv delete";
            case KvOp::kNumKeys:
              return "kv num_keys";
          }
        }
        return "a request";
      },
      message);
}

}  // namespace

class RendezvousClient::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, ClientOptions options)
      : ex_(io.get_executor()),
        options_(std::move(options)),
        rng_(std::random_device{}()),
        ticker_(ex_),
        wake_(ex_),
        close_timer_(ex_) {}

  enum class State { kIdle, kConnecting, kConnected, kReconnecting, kLost, kClosed };
  using ReplyHandler = std::function<void(const Reply&)>;

  void connect(std::function<void(Status)> done);
  void join(JoinRequest request, std::function<void(Result<RoundAssignment>)> done);
  // Sends a request; `on_reply` gets the server's Reply, or a failed Reply when the request
  // cannot be sent, the connection is lost before the answer, or no answer comes within
  // request_timeout (+ `extra_time`, for requests the server may hold, like kv_wait).
  void request(ClientMessage message, uint32_t id, ReplyHandler on_reply,
               Millis extra_time = Millis(0));
  uint32_t next_id() { return next_request_++; }
  void close(std::function<void()> done);
  void abort();

  // Runs `fn` later on the io_context unless the client has closed by then; never throws.
  template <class F>
  void deliver(F fn) {
    asio::post(ex_, [self = shared_from_this(), fn = std::move(fn)]() mutable {
      if (self->state_ == State::kClosed) return;
      try {
        fn();
      } catch (const std::exception& e) {
        spdlog::error("rendezvous client: a callback threw: {}", e.what());
      } catch (...) {
        spdlog::error("rendezvous client: a callback threw");
      }
    });
  }
  void emit(RendezvousEvent event) {
    deliver([this, event = std::move(event)] {
      if (handler_) handler_(event);
    });
  }

  asio::any_io_executor ex_;
  ClientOptions options_;
  std::mt19937_64 rng_;
  std::shared_ptr<bool> stop_ = std::make_shared<bool>(false);
  State state_ = State::kIdle;
  std::function<void(const RendezvousEvent&)> handler_;
  std::optional<RoundAssignment> assignment_;

 private:
  ConnectOptions connect_options(Millis deadline) const;
  void start_connection(tcp::socket socket);
  asio::awaitable<void> read_loop(uint64_t gen);
  asio::awaitable<void> write_loop(uint64_t gen);
  asio::awaitable<void> reconnect();
  void tick(uint64_t gen);
  void on_message(ServerMessage&& message);
  void on_lost(const std::string& why);
  void give_up(const std::string& why);
  void finish_join(Result<RoundAssignment> result);
  void send_frame(std::string frame);
  void drop_socket();
  // Registers the handler of request `id` and arms its deadline.
  void track(uint32_t id, std::string what, ReplyHandler on_reply, Millis timeout);
  void fail_request(uint32_t id, const std::string& why);

  struct PendingRequest {
    ReplyHandler on_reply;
    // Destroyed (so cancelled) with the entry, when the answer comes or the connection dies.
    std::unique_ptr<asio::steady_timer> deadline;
  };

  std::optional<tcp::socket> socket_;
  uint64_t gen_ = 0;  // connection generation: coroutines of an older one do nothing
  SteadyTime last_rx_;
  asio::steady_timer ticker_;  // heartbeats, and the silence check
  asio::steady_timer wake_;    // wakes the writer
  asio::steady_timer close_timer_;
  std::deque<std::string> outbox_;
  std::unordered_map<uint32_t, PendingRequest> requests_;
  uint32_t next_request_ = 1;
  std::function<void(Result<RoundAssignment>)> join_done_;
  std::string node_id_;
  uint64_t token_ = 0;  // membership token from the join reply; 0 = not a member
  bool closing_ = false;
  bool job_over_ = false;  // JobSucceeded/JobFailed arrived: a lost connection is expected now
};

ConnectOptions RendezvousClient::Impl::connect_options(Millis deadline) const {
  ConnectOptions c;
  c.host = options_.host;
  c.port = options_.port;
  c.local_address = options_.local_address;
  c.job_id = options_.job_id;
  c.deadline = deadline;
  c.attempt_timeout = options_.attempt_timeout;
  c.initial_backoff = options_.initial_backoff;
  c.max_backoff = options_.max_backoff;
  c.jitter = options_.jitter;
  c.limits = options_.limits;
  return c;
}

void RendezvousClient::Impl::connect(std::function<void(Status)> done) {
  if (state_ != State::kIdle) {
    return deliver([done] { done(Status::error("connect() called twice")); });
  }
  state_ = State::kConnecting;
  auto self = shared_from_this();
  asio::co_spawn(
      ex_,
      [self, done]() -> asio::awaitable<void> {
        auto socket = co_await connect_with_backoff(
            self->ex_, self->connect_options(self->options_.connect_timeout), self->rng_,
            self->stop_);
        if (self->state_ == State::kClosed) co_return;
        if (!socket) {
          self->state_ = State::kIdle;
          self->deliver([done, s = socket.status()] { done(s); });
          co_return;
        }
        self->state_ = State::kConnected;
        self->start_connection(std::move(*socket));
        self->deliver([done] { done(Status()); });
      },
      LogCoroutineEnd{"rendezvous client connect"});
}

void RendezvousClient::Impl::start_connection(tcp::socket socket) {
  socket_.emplace(std::move(socket));
  const uint64_t gen = ++gen_;
  last_rx_ = std::chrono::steady_clock::now();
  auto self = shared_from_this();
  asio::co_spawn(
      ex_, [self, gen] { return self->read_loop(gen); },
      LogCoroutineEnd{"rendezvous client reader"});
  asio::co_spawn(
      ex_, [self, gen] { return self->write_loop(gen); },
      LogCoroutineEnd{"rendezvous client writer"});
  tick(gen);
}

// One timer does both jobs of liveness: send a heartbeat every keep_alive_interval, and call
// the connection lost when the server has been silent (not even a HeartbeatAck) too long.
void RendezvousClient::Impl::tick(uint64_t gen) {
  ticker_.expires_after(options_.keep_alive_interval);
  ticker_.async_wait([weak = weak_from_this(), gen](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || gen != self->gen_ || self->state_ == State::kClosed) return;
    const auto silent = std::chrono::steady_clock::now() - self->last_rx_;
    if (silent > self->options_.heartbeat_timeout) {
      return self->on_lost(fmt::format("the server was silent for {} ms",
                                       std::chrono::duration_cast<Millis>(silent).count()));
    }
    self->send_frame(encode_frame(ClientMessage(HeartbeatMsg{})));
    self->tick(gen);
  });
}

asio::awaitable<void> RendezvousClient::Impl::read_loop(uint64_t gen) {
  std::vector<uint8_t> body;
  auto self = shared_from_this();  // keeps *this alive while the coroutine runs
  while (gen == gen_ && socket_) {
    Status read = co_await read_frame(*socket_, options_.limits, body);
    if (gen != gen_ || state_ == State::kClosed) co_return;
    if (!read) co_return on_lost(read.message());
    auto message = decode_server_message(body, options_.limits);
    if (!message) co_return on_lost("bad frame from the server: " + message.error_message());
    last_rx_ = std::chrono::steady_clock::now();
    on_message(std::move(*message));
  }
}

asio::awaitable<void> RendezvousClient::Impl::write_loop(uint64_t gen) {
  auto self = shared_from_this();
  boost::system::error_code ec;
  std::vector<std::string> batch;
  std::vector<asio::const_buffer> buffers;
  while (gen == gen_ && socket_ && state_ != State::kClosed) {
    if (outbox_.empty()) {
      wake_.expires_at(asio::steady_timer::time_point::max());
      co_await wake_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    batch.assign(std::make_move_iterator(outbox_.begin()), std::make_move_iterator(outbox_.end()));
    outbox_.clear();
    buffers.clear();
    for (const auto& f : batch) buffers.push_back(asio::buffer(f));
    co_await asio::async_write(*socket_, buffers, asio::redirect_error(asio::use_awaitable, ec));
    if (ec && gen == gen_ && state_ != State::kClosed) co_return on_lost(ec.message());
  }
}

void RendezvousClient::Impl::send_frame(std::string frame) {
  outbox_.push_back(std::move(frame));
  wake_.cancel();
}

void RendezvousClient::Impl::request(ClientMessage message, uint32_t id, ReplyHandler on_reply,
                                     Millis extra_time) {
  if (state_ == State::kClosed) return;
  if (state_ != State::kConnected && state_ != State::kReconnecting) {
    Reply r;
    r.request_id = id;
    r.ok = false;
    r.error = state_ == State::kLost ? "the connection to the rendezvous server is lost"
                                     : "not connected to the rendezvous server; connect() first";
    return deliver([on_reply, r] { on_reply(r); });
  }
  track(id, describe(message), std::move(on_reply), options_.request_timeout + extra_time);
  send_frame(encode_frame(message));  // while reconnecting: queued behind the Resume
}

void RendezvousClient::Impl::track(uint32_t id, std::string what, ReplyHandler on_reply,
                                   Millis timeout) {
  auto deadline = std::make_unique<asio::steady_timer>(ex_, timeout);
  deadline->async_wait(
      [weak = weak_from_this(), id, what = std::move(what), timeout](boost::system::error_code ec) {
        auto self = weak.lock();
        if (ec || !self || self->state_ == State::kClosed) return;
        self->fail_request(
            id, fmt::format("the rendezvous server at {}:{} did not answer {} "
                            "within {} ms",
                            self->options_.host, self->options_.port, what, timeout.count()));
      });
  requests_[id] = PendingRequest{std::move(on_reply), std::move(deadline)};
}

void RendezvousClient::Impl::fail_request(uint32_t id, const std::string& why) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  ReplyHandler handler = std::move(it->second.on_reply);
  requests_.erase(it);  // an answer arriving later finds no handler and is dropped
  spdlog::warn("rendezvous client: {}", why);
  Reply failed;
  failed.request_id = id;
  failed.ok = false;
  failed.error = why;
  deliver([handler = std::move(handler), failed] { handler(failed); });
}

void RendezvousClient::Impl::on_message(ServerMessage&& message) {
  std::visit(
      [&](auto&& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Reply>) {
          auto it = requests_.find(m.request_id);
          if (it == requests_.end()) return;  // answered too late: the caller had its error
          ReplyHandler handler = std::move(it->second.on_reply);
          requests_.erase(it);
          deliver([handler, m] { handler(m); });
        } else if constexpr (std::is_same_v<M, RoundAssigned>) {
          assignment_ = m;
          finish_join(m);
        } else if constexpr (std::is_same_v<M, RestartRequested>) {
          emit(m);
        } else if constexpr (std::is_same_v<M, JobFailed>) {
          job_over_ = true;
          finish_join(Status::error(m.reason));
          emit(m);
        } else if constexpr (std::is_same_v<M, JobSucceeded>) {
          job_over_ = true;
          finish_join(Status::error("the job has already succeeded"));
          emit(m);
        } else if constexpr (std::is_same_v<M, ErrorMsg>) {
          spdlog::log(job_over_ ? spdlog::level::debug : spdlog::level::warn,
                      "rendezvous server closes our connection: {}", m.message);
        }
      },
      std::move(message));
}

void RendezvousClient::Impl::finish_join(Result<RoundAssignment> result) {
  if (!join_done_) return;
  deliver(
      [done = std::exchange(join_done_, nullptr), result = std::move(result)] { done(result); });
}

void RendezvousClient::Impl::drop_socket() {
  ++gen_;  // the old connection's coroutines see they are stale and stop
  if (socket_) {
    boost::system::error_code ignored;
    socket_->shutdown(tcp::socket::shutdown_both, ignored);
    socket_->close(ignored);
    socket_.reset();
  }
  ticker_.cancel();
  wake_.cancel();
  outbox_.clear();
}

void RendezvousClient::Impl::on_lost(const std::string& why) {
  if (state_ == State::kClosed || state_ == State::kLost) return;
  spdlog::log(job_over_ ? spdlog::level::debug : spdlog::level::warn,
              "rendezvous client: connection to {}:{} lost: {}", options_.host, options_.port, why);
  drop_socket();
  Reply failed;
  failed.ok = false;
  failed.error = "connection to the rendezvous server lost before the reply: " + why;
  for (auto& [id, pending] : std::exchange(requests_, {})) {
    failed.request_id = id;
    deliver([handler = std::move(pending.on_reply), failed] { handler(failed); });
  }
  if (token_ == 0 || closing_) return give_up(why);
  state_ = State::kReconnecting;
  asio::co_spawn(
      ex_, [self = shared_from_this()] { return self->reconnect(); },
      LogCoroutineEnd{"rendezvous client reconnect"});
}

// Within heartbeat_timeout — the same window the server keeps our place — reconnect and prove
// with the membership token that we are the same node.
asio::awaitable<void> RendezvousClient::Impl::reconnect() {
  auto self = shared_from_this();
  auto socket =
      co_await connect_with_backoff(ex_, connect_options(options_.heartbeat_timeout), rng_, stop_);
  if (state_ != State::kReconnecting) co_return;
  if (!socket) co_return give_up(socket.error_message());
  const uint32_t id = next_id();
  auto on_resumed = [this](const Reply& r) {
    if (state_ != State::kReconnecting) return;
    if (r.ok) {
      state_ = State::kConnected;
      spdlog::info("rendezvous client: reconnected to {}:{}", options_.host, options_.port);
    } else {
      on_lost("the server refused to resume our membership: " + r.error);
    }
  };
  track(id, "resume", std::move(on_resumed), options_.request_timeout);
  outbox_.push_front(encode_frame(ClientMessage(ResumeMsg{id, node_id_, token_})));
  start_connection(std::move(*socket));
}

void RendezvousClient::Impl::give_up(const std::string& why) {
  state_ = State::kLost;
  drop_socket();
  const std::string message =
      fmt::format("lost the rendezvous server at {}:{}: {}", options_.host, options_.port, why);
  finish_join(Status::error(message));
  emit(ConnectionLost{message});
}

void RendezvousClient::Impl::join(JoinRequest req,
                                  std::function<void(Result<RoundAssignment>)> done) {
  if (join_done_) {
    return deliver([done] { done(Status::error("join() while another join is pending")); });
  }
  JoinMsg m;
  m.request_id = next_id();
  m.node_id = req.node_id;
  m.local_world_size = req.local_world_size;
  m.node_rank_hint = req.node_rank_hint ? static_cast<int32_t>(*req.node_rank_hint) : -1;
  m.master_addr = req.master_addr;
  m.master_port = req.master_port;
  m.min_nodes = req.min_nodes;
  m.max_nodes = req.max_nodes;
  m.max_restarts = req.max_restarts;
  m.join_timeout_ms = static_cast<uint64_t>(req.join_timeout.count());
  m.last_call_timeout_ms = static_cast<uint64_t>(req.last_call_timeout.count());
  m.heartbeat_timeout_ms = static_cast<uint64_t>(req.heartbeat_timeout.count());
  m.exit_barrier_timeout_ms = static_cast<uint64_t>(req.exit_barrier_timeout.count());
  node_id_ = req.node_id;
  join_done_ = std::move(done);
  const uint32_t id = m.request_id;
  request(std::move(m), id, [this](const Reply& r) {
    if (r.ok) {
      token_ = static_cast<uint64_t>(r.integer);
    } else {
      finish_join(Status::error(r.error));
    }
  });
}

void RendezvousClient::Impl::close(std::function<void()> done) {
  auto finish = [self = shared_from_this(), done] {
    if (self->state_ == State::kClosed) return;
    self->abort();
    if (done) asio::post(self->ex_, done);
  };
  if (closing_ || state_ == State::kClosed) {
    if (done) asio::post(ex_, done);
    return;
  }
  closing_ = true;
  if (state_ != State::kConnected) return finish();
  const uint32_t id = next_id();
  request(ClientMessage(LeaveMsg{id}), id, [finish](const Reply&) { finish(); });
  close_timer_.expires_after(options_.attempt_timeout);
  close_timer_.async_wait([finish](const boost::system::error_code& ec) {
    if (!ec) finish();
  });
}

void RendezvousClient::Impl::abort() {
  state_ = State::kClosed;
  *stop_ = true;
  drop_socket();
  close_timer_.cancel();
  requests_.clear();
  join_done_ = nullptr;
  handler_ = nullptr;
}

// ---- RendezvousClient: thin forwarding to Impl ----

RendezvousClient::RendezvousClient(asio::io_context& io, ClientOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

RendezvousClient::~RendezvousClient() { impl_->abort(); }

void RendezvousClient::set_event_handler(std::function<void(const RendezvousEvent&)> handler) {
  impl_->handler_ = std::move(handler);
}

void RendezvousClient::connect(std::function<void(Status)> done) {
  impl_->connect(std::move(done));
}

void RendezvousClient::join(JoinRequest request,
                            std::function<void(Result<RoundAssignment>)> done) {
  impl_->join(std::move(request), std::move(done));
}

namespace {
// Adapts a Reply to a Status callback (absent callbacks are fine).
std::function<void(const Reply&)> status_of(std::function<void(Status)> done) {
  return [done = std::move(done)](const Reply& r) {
    if (done) done(r.ok ? Status() : Status::error(r.error));
  };
}
KvMsg kv_msg(KvOp op, uint32_t id, KvScope scope, std::vector<std::string> keys) {
  KvMsg m;
  m.op = op;
  m.request_id = id;
  m.scope = scope;
  m.keys = std::move(keys);
  return m;
}
}  // namespace

void RendezvousClient::report_worker_failure(std::string report, int32_t exit_code,
                                             std::function<void(Status)> done) {
  const uint32_t id = impl_->next_id();
  const uint64_t round = impl_->assignment_ ? impl_->assignment_->round : 0;
  impl_->request(ReportFailureMsg{id, round, std::move(report), exit_code}, id,
                 status_of(std::move(done)));
}

void RendezvousClient::report_success(std::function<void(Status)> done) {
  const uint32_t id = impl_->next_id();
  const uint64_t round = impl_->assignment_ ? impl_->assignment_->round : 0;
  impl_->request(ReportSuccessMsg{id, round}, id, status_of(std::move(done)));
}

void RendezvousClient::kv_set(KvScope scope, std::string key, std::string value,
                              std::function<void(Status)> done) {
  const uint32_t id = impl_->next_id();
  KvMsg m = kv_msg(KvOp::kSet, id, scope, {std::move(key)});
  m.value = std::move(value);
  impl_->request(std::move(m), id, status_of(std::move(done)));
}

void RendezvousClient::kv_get(KvScope scope, std::string key,
                              std::function<void(Result<std::optional<std::string>>)> done) {
  const uint32_t id = impl_->next_id();
  impl_->request(kv_msg(KvOp::kGet, id, scope, {std::move(key)}), id, [done](const Reply& r) {
    if (!r.ok) return done(Status::error(r.error));
    done(r.found ? std::optional<std::string>(r.value) : std::nullopt);
  });
}

void RendezvousClient::kv_add(KvScope scope, std::string key, int64_t delta,
                              std::function<void(Result<int64_t>)> done) {
  const uint32_t id = impl_->next_id();
  KvMsg m = kv_msg(KvOp::kAdd, id, scope, {std::move(key)});
  m.delta = delta;
  impl_->request(std::move(m), id,
                 [done](const Reply& r) { r.ok ? done(r.integer) : done(Status::error(r.error)); });
}

void RendezvousClient::kv_compare_set(KvScope scope, std::string key, std::string expected,
                                      std::string desired,
                                      std::function<void(Result<std::string>)> done) {
  const uint32_t id = impl_->next_id();
  KvMsg m = kv_msg(KvOp::kCompareSet, id, scope, {std::move(key)});
  m.value = std::move(expected);
  m.desired = std::move(desired);
  impl_->request(std::move(m), id,
                 [done](const Reply& r) { r.ok ? done(r.value) : done(Status::error(r.error)); });
}

void RendezvousClient::kv_wait(KvScope scope, std::vector<std::string> keys, Millis timeout,
                               std::function<void(Status)> done) {
  const uint32_t id = impl_->next_id();
  KvMsg m = kv_msg(KvOp::kWait, id, scope, std::move(keys));
  m.timeout_ms = static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0));
  impl_->request(std::move(m), id, status_of(std::move(done)), std::max(timeout, Millis(0)));
}

void RendezvousClient::kv_delete(KvScope scope, std::string key,
                                 std::function<void(Result<bool>)> done) {
  const uint32_t id = impl_->next_id();
  impl_->request(kv_msg(KvOp::kDelete, id, scope, {std::move(key)}), id, [done](const Reply& r) {
    r.ok ? done(r.integer != 0) : done(Status::error(r.error));
  });
}

void RendezvousClient::kv_num_keys(KvScope scope, std::function<void(Result<int64_t>)> done) {
  const uint32_t id = impl_->next_id();
  impl_->request(kv_msg(KvOp::kNumKeys, id, scope, {}), id,
                 [done](const Reply& r) { r.ok ? done(r.integer) : done(Status::error(r.error)); });
}

void RendezvousClient::close(std::function<void()> done) { impl_->close(std::move(done)); }

bool RendezvousClient::connected() const { return impl_->state_ == Impl::State::kConnected; }

const std::optional<RoundAssignment>& RendezvousClient::assignment() const {
  return impl_->assignment_;
}

}  // namespace ddprun::rdzv
