#include "rendezvous/client/channel.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>

#include "rendezvous/wire/frame_io.h"

namespace ddprun::rdzv {
namespace {

// Names a request in error messages: "join", "the success report", ...
std::string describe(const ClientMessage& message) {
  return std::visit(
      [](const auto& m) -> std::string {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, JoinMsg>) return "join";
        if constexpr (std::is_same_v<M, ResumeMsg>) return "resume";
        if constexpr (std::is_same_v<M, ReportFailureMsg>) return "the worker-failure report";
        if constexpr (std::is_same_v<M, ReportSuccessMsg>) return "the success report";
        if constexpr (std::is_same_v<M, LeaveMsg>) return "leave";
        if constexpr (std::is_same_v<M, ProgressQueryMsg>) return "the progress query";
        if constexpr (std::is_same_v<M, ProgressMsg>) return "the progress report";
        return "a request";
      },
      message);
}

Reply failed_reply(uint32_t id, std::string why) {
  Reply r;
  r.request_id = id;
  r.ok = false;
  r.error = std::move(why);
  return r;
}

}  // namespace

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

std::shared_ptr<Channel> Channel::create(asio::io_context& io, ClientOptions options, Hooks hooks,
                                         const Clock& clock) {
  return std::make_shared<Channel>(io, std::move(options), std::move(hooks), clock);
}

namespace {
std::vector<ServerAddress> every_server(const ClientOptions& o) {
  std::vector<ServerAddress> servers{{o.host, o.port}};
  servers.insert(servers.end(), o.more_servers.begin(), o.more_servers.end());
  return servers;
}
}  // namespace

Channel::Channel(asio::io_context& io, ClientOptions options, Hooks hooks, const Clock& clock)
    : executor_(io.get_executor()),
      options_(std::move(options)),
      clock_(clock),
      servers_(every_server(options_)),
      current_(servers_.front()),
      hooks_(std::move(hooks)),
      rng_(std::random_device{}()),
      ticker_(executor_),
      close_timer_(executor_),
      writer_(executor_) {
  // Random, so that request ids name one client's requests: a node id reused by another
  // process does not make its requests look like repeats of ours (delivery_log.h).
  next_request_ = static_cast<uint32_t>(rng_()) | 1;
}

void Channel::guarded(const std::function<void()>& fn) const {
  try {
    fn();
  } catch (const std::exception& e) {
    spdlog::error("rendezvous client: a callback threw: {}", e.what());
  } catch (...) {
    spdlog::error("rendezvous client: a callback threw");
  }
}

ConnectOptions Channel::connect_options(Millis deadline, bool after_current) const {
  ConnectOptions c;
  c.servers = servers_;
  if (after_current && servers_.size() > 1) {
    // The server just lost is tried last: with replicas, another one most likely leads now.
    auto it = std::find(c.servers.begin(), c.servers.end(), current_);
    if (it != c.servers.end()) std::rotate(c.servers.begin(), it + 1, c.servers.end());
  }
  c.local_address = options_.local_address;
  c.job_id = options_.job_id;
  c.deadline = deadline;
  c.attempt_timeout = options_.attempt_timeout;
  c.initial_backoff = options_.initial_backoff;
  c.max_backoff = options_.max_backoff;
  c.jitter = options_.jitter;
  c.limits = options_.limits;
  c.credentials = options_.credentials;
  return c;
}

void Channel::connect(std::function<void(Status)> done) {
  if (state_ != State::kIdle) {
    return deliver([done] { done(Status::error("connect() called twice")); });
  }
  state_ = State::kConnecting;
  auto self = shared_from_this();
  asio::co_spawn(
      executor_,
      [self, done = std::move(done)]() -> asio::awaitable<void> {
        auto socket = co_await connect_with_backoff(
            self->executor_, self->connect_options(self->options_.connect_timeout, false),
            self->rng_, self->clock_, self->stop_);
        if (self->state_ != State::kConnecting) co_return;  // closed meanwhile
        if (!socket) {
          self->state_ = State::kLost;
          self->deliver([done, s = socket.status()] { done(s); });
          co_return;
        }
        self->state_ = State::kConnected;
        self->current_ = socket->server;
        self->start_connection(std::move(socket->stream));
        self->deliver([done] { done(Status()); });
      },
      LogCoroutineEnd{"rendezvous client connect"});
}

void Channel::start_connection(Stream stream) {
  socket_ = std::make_shared<Stream>(std::move(stream));
  const uint64_t generation = ++generation_;
  last_rx_ = clock_.steady_now();
  auto self = shared_from_this();
  asio::co_spawn(
      executor_, [self, generation] { return self->read_loop(generation); },
      LogCoroutineEnd{"rendezvous client reader"});
  asio::co_spawn(
      executor_, [self, generation] { return self->write_loop(generation); },
      LogCoroutineEnd{"rendezvous client writer"});
  tick(generation);
}

// Every keep_alive_interval: give up on a server silent for heartbeat_timeout, else ping it.
void Channel::tick(uint64_t generation) {
  ticker_.expires_after(options_.keep_alive_interval);
  ticker_.async_wait([self = shared_from_this(), generation](const boost::system::error_code& ec) {
    if (ec || generation != self->generation_ || self->state_ == State::kClosed) return;
    const auto silent = self->clock_.steady_now() - self->last_rx_;
    if (silent >= self->options_.heartbeat_timeout) {
      return self->on_connection_lost(
          fmt::format("no answer for {} ms (heartbeat_timeout)",
                      std::chrono::duration_cast<Millis>(silent).count()));
    }
    self->writer_.enqueue(encode_frame(ClientMessage(HeartbeatMsg{self->pushes_received_})));
    self->tick(generation);
  });
}

asio::awaitable<void> Channel::read_loop(uint64_t generation) {
  std::vector<uint8_t> body;
  auto self = shared_from_this();  // keeps *this alive while the coroutine runs
  // Held while the read is pending: a TLS stream's operations refer to it until they complete,
  // even after drop_socket() closed it.
  const std::shared_ptr<Stream> stream = socket_;
  while (generation == generation_ && stream) {
    Status read = co_await read_frame(*stream, options_.limits, body);
    if (generation != generation_ || state_ == State::kClosed) co_return;
    // A closed read (EOF, reset; with TLS, a truncated stream) is the server's side ending
    // the connection: the reconnect tells whether its process is gone (channel.h).
    if (!read) co_return on_connection_lost(read.message(), read.is_closed() || read.is_refused());
    auto message = decode_server_message(body, options_.limits);
    if (!message)
      co_return on_connection_lost("bad frame from the server: " + message.error_message());
    last_rx_ = clock_.steady_now();
    on_frame(std::move(*message));
  }
}

asio::awaitable<void> Channel::write_loop(uint64_t generation) {
  auto self = shared_from_this();
  const std::shared_ptr<Stream> stream = socket_;  // see read_loop
  if (generation != generation_ || !stream) co_return;
  Status written = co_await writer_.run(*stream, [this, generation] {
    return generation == generation_ && socket_ && state_ != State::kClosed;
  });
  if (!written && generation == generation_ && state_ != State::kClosed) {
    on_connection_lost(written.message());
  }
}

void Channel::on_frame(ServerMessage&& message) {
  if (auto* reply = std::get_if<Reply>(&message)) {
    auto it = requests_.find(reply->request_id);
    if (it == requests_.end()) return;  // answered too late: the caller had its error
    ReplyHandler handler = std::move(it->second.on_reply);
    requests_.erase(it);
    deliver([handler = std::move(handler), r = std::move(*reply)] { handler(r); });
    return;
  }
  if (std::holds_alternative<HeartbeatAck>(message) || std::holds_alternative<HelloAck>(message)) {
    return;
  }
  if (is_push(message)) ++pushes_received_;
  if (hooks_.on_message) guarded([&] { hooks_.on_message(std::move(message)); });
}

void Channel::request(const ClientMessage& message, uint32_t id, ReplyHandler on_reply,
                      Millis extra_time) {
  if (state_ == State::kClosed) return;
  if (state_ != State::kConnected && state_ != State::kReconnecting) {
    std::string why = state_ == State::kLost
                          ? "the connection to the rendezvous server is lost"
                          : "not connected to the rendezvous server; connect() first";
    return deliver([on_reply, r = failed_reply(id, std::move(why))] { on_reply(r); });
  }
  std::string frame = encode_frame(message);
  // Without a connection it waits in requests_: the reconnect sends it after the resume.
  if (socket_) writer_.enqueue(frame);
  track(id, describe(message), std::move(frame), std::move(on_reply),
        options_.request_timeout + extra_time);
}

void Channel::send(const ClientMessage& message) {
  if (state_ == State::kConnected || state_ == State::kReconnecting) {
    writer_.enqueue(encode_frame(message));
  }
}

void Channel::track(uint32_t id, std::string what, std::string frame, ReplyHandler on_reply,
                    Millis timeout) {
  auto deadline = std::make_unique<asio::steady_timer>(executor_, timeout);
  deadline->async_wait([weak = weak_from_this(), id, what = std::move(what),
                        timeout](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->state_ == State::kClosed) return;
    self->fail_request(id, fmt::format("the rendezvous server at {} did not answer {} within {} ms",
                                       self->server_name(), what, timeout.count()));
  });
  requests_[id] = PendingRequest{std::move(on_reply), std::move(frame), std::move(deadline)};
}

void Channel::fail_request(uint32_t id, const std::string& why) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  ReplyHandler handler = std::move(it->second.on_reply);
  requests_.erase(it);  // an answer arriving later finds no handler and is dropped
  spdlog::warn("rendezvous client: {}", why);
  deliver([handler = std::move(handler), r = failed_reply(id, why)] { handler(r); });
}

void Channel::fail_all_requests(const std::string& why) {
  for (auto& [id, pending] : std::exchange(requests_, {})) {
    deliver([handler = std::move(pending.on_reply), r = failed_reply(id, why)] { handler(r); });
  }
}

void Channel::drop_socket() {
  ++generation_;  // the old connection's coroutines see they are stale and stop
  if (socket_) {
    socket_->close();
    socket_.reset();
  }
  ticker_.cancel();
  writer_.wake();
  writer_.clear();
}

void Channel::on_connection_lost(const std::string& why, bool peer_closed) {
  if (state_ == State::kClosed || state_ == State::kLost) return;
  peer_closed_ = peer_closed;
  silence_at_loss_ = std::chrono::duration_cast<Millis>(clock_.steady_now() - last_rx_);
  spdlog::log(quiet_ ? spdlog::level::debug : spdlog::level::warn,
              "rendezvous client: connection to {} lost: {}", server_name(), why);
  drop_socket();
  if (closing_) return give_up(why);  // nothing left to keep
  // The resume of an earlier reconnect is superseded by the one built now.
  if (const uint32_t stale = std::exchange(pending_resume_, 0)) requests_.erase(stale);
  const uint32_t resume_id = next_request_id();
  std::optional<ClientMessage> resume =
      hooks_.resume_request ? hooks_.resume_request(resume_id, pushes_received_) : std::nullopt;
  if (!resume && requests_.empty()) return give_up(why);
  state_ = State::kReconnecting;
  asio::co_spawn(
      executor_,
      [self = shared_from_this(), resume = std::move(resume), resume_id]() mutable {
        return self->reconnect(std::move(resume), resume_id);
      },
      LogCoroutineEnd{"rendezvous client reconnect"});
}

// Within heartbeat_timeout (the same window the server keeps our place) reconnect, and send
// the owner's resume request before anything queued meanwhile.
asio::awaitable<void> Channel::reconnect(std::optional<ClientMessage> resume, uint32_t resume_id) {
  auto self = shared_from_this();
  ConnectOptions to = connect_options(options_.heartbeat_timeout, true);
  // With replicas, one refusing says nothing about the others.
  to.stop_when_refused = give_up_when_gone_ && peer_closed_ && servers_.size() == 1;
  auto socket = co_await connect_with_backoff(executor_, std::move(to), rng_, clock_, stop_);
  if (state_ != State::kReconnecting) co_return;
  if (!socket) co_return give_up(socket.error_message());
  // First the resume, then every request the lost connection left unanswered (in the order
  // they were made), then whatever was queued meanwhile.
  std::vector<uint32_t> unanswered;
  for (const auto& [id, pending] : requests_) unanswered.push_back(id);
  std::sort(unanswered.begin(), unanswered.end(), std::greater<>());
  for (uint32_t id : unanswered) writer_.enqueue_front(requests_.at(id).frame);
  current_ = socket->server;
  if (resume) {
    pending_resume_ = resume_id;
    auto on_resumed = [this, resume_id](const Reply& r) {
      // A failed reply of an earlier attempt (its connection dropped) is not the server's
      // answer.
      if (state_ != State::kReconnecting || resume_id != pending_resume_) return;
      if (r.ok) {
        state_ = State::kConnected;
        spdlog::info("rendezvous client: reconnected to {}", server_name());
      } else if (socket_) {
        give_up("the server refused to resume our membership: " + r.error);
      }
    };
    std::string frame = encode_frame(*resume);
    writer_.enqueue_front(frame);
    track(resume_id, "resume", std::move(frame), std::move(on_resumed), options_.request_timeout);
  } else {
    // No membership yet (the answer to our first join was lost): nothing to resume.
    state_ = State::kConnected;
    spdlog::info("rendezvous client: reconnected to {}; sending {} unanswered request(s) again",
                 server_name(), unanswered.size());
  }
  start_connection(std::move(socket->stream));
}

void Channel::give_up(const std::string& why) {
  state_ = State::kLost;
  drop_socket();
  fail_all_requests("connection to the rendezvous server lost before the reply: " + why);
  const std::string message =
      fmt::format("lost the rendezvous server at {}: {}", server_name(), why);
  if (hooks_.on_lost) deliver([this, message] { hooks_.on_lost(message); });
}

void Channel::close(const std::function<ClientMessage(uint32_t)>& farewell,
                    std::function<void()> done) {
  auto finish = [self = shared_from_this(), done] {
    if (self->state_ == State::kClosed) return;
    self->abort();
    if (done) asio::post(self->executor_, done);
  };
  if (closing_ || state_ == State::kClosed) {
    if (done) asio::post(executor_, done);
    return;
  }
  closing_ = true;
  quiet_ = true;
  if (state_ != State::kConnected || !farewell) return finish();
  const uint32_t id = next_request_id();
  request(farewell(id), id, [finish](const Reply&) { finish(); });
  close_timer_.expires_after(options_.attempt_timeout);
  close_timer_.async_wait([finish](const boost::system::error_code& ec) {
    if (!ec) finish();
  });
}

void Channel::abort() {
  state_ = State::kClosed;
  *stop_ = true;
  drop_socket();
  close_timer_.cancel();
  requests_.clear();
  hooks_ = {};
}

}  // namespace ddprun::rdzv
