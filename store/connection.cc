#include "store/connection.h"

#include <exception>
#include <span>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/write.hpp>

#include "store/codec.h"

namespace ddprun::store::detail {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
const char* dialect_label(Dialect d) {
  switch (d) {
    case Dialect::kLegacy:
      return "torch 1.x-2.0 client";
    case Dialect::kValidated:
      return "torch 2.x client";
    default:
      return "client";
  }
}
}  // namespace

Connection::Connection(tcp::socket socket, std::shared_ptr<SharedState> state,
                       std::function<void()> on_end)
    : socket_(std::move(socket)),
      state_(std::move(state)),
      on_end_(std::move(on_end)),
      partial_timer_(socket_.get_executor()) {}

Connection::~Connection() { state_->engine.forget(*this); }

std::string Connection::peer() const {
  boost::system::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  return ec ? "unknown peer" : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

void Connection::start() {
  // flush() sends without waiting: a full socket buffer must say so, not block the loop.
  boost::system::error_code ec;
  socket_.non_blocking(true, ec);
  if (ec) {
    spdlog::warn("store: cannot serve a connection: making its socket non-blocking: {}",
                 ec.message());
    return finish();
  }
  read_more();
}

// The reader is a chain of completion handlers, not a coroutine: a query costs one read, and
// resuming a coroutine through Asio's awaitable machinery cost more than the handler's own work
// (4,096 clients: the store's user-space CPU fell by about a third without it).
void Connection::read_more() {
  arm_partial_timer();
  const std::span<uint8_t> space = in_.space(need_);
  socket_.async_read_some(asio::buffer(space.data(), space.size()),
                          [self = shared_from_this()](const boost::system::error_code& ec,
                                                      size_t n) { self->on_read(ec, n); });
}

void Connection::on_read(const boost::system::error_code& ec, size_t n) {
  in_.commit(n);
  if (ec) {
    peer_closed_ = ec == asio::error::eof;
    if (open_ && !peer_closed_) spdlog::debug("store: {} disconnected: {}", peer(), ec.message());
    return finish();
  }
  // Nothing may escape a completion handler into the io_context's run(): should the engine
  // run out of memory, this connection ends with a log line and the store goes on.
  try {
    if (open_ && process_input() && open_) return read_more();
  } catch (const std::exception& e) {
    spdlog::error("store: closing the connection of {}: {}", peer(), e.what());
  }
  finish();
}

bool Connection::process_input() {
  size_t begin = 0;
  bool ok = true;
  decoding_ = true;
  while (open_) {
    const std::span<const uint8_t> rest = in_.data().subspan(begin);
    if (dialect_ == Dialect::kUnknown) {
      const DialectProbe probe = detect_dialect(rest);
      if (probe.dialect == Dialect::kUnknown) {
        need_ = probe.need;
        break;
      }
      dialect_ = probe.dialect;
      ++(dialect_ == Dialect::kLegacy ? state_->counters.connections_legacy
                                      : state_->counters.connections_validated);
    }
    auto step = decode_request(rest, dialect_, state_->options.codec);
    if (!step) {
      drop(step.status().message(), &StoreStats::protocol_errors);
      ok = false;
      break;
    }
    if (!step->request) {
      need_ = step->need;
      break;
    }
    begin += step->consumed;
    if (Status s = handle(*step->request); !s) {
      drop(fmt::format("{} refused: {}", op_name(step->request->op), s.message()),
           s.is_malformed() ? &StoreStats::protocol_errors : nullptr);
      ok = false;
      break;
    }
  }
  decoding_ = false;
  in_.consume(begin);
  flush();  // every reply of this read's queries in one send
  return ok && open_;
}

Status Connection::handle(Request& r) {
  ++state_->counters.operations[static_cast<size_t>(r.op)];
  // A c10d client waits synchronously, so a new query while its wait is pending means it gave
  // up (torch 1.x times out without telling the server). Dropping the wait keeps a late
  // STOP_WAITING from landing in the reply to this query.
  StoreEngine& engine = state_->engine;
  if (r.op != Op::kCancelWait && engine.has_pending_wait(*this)) engine.cancel_wait(*this);
  switch (r.op) {
    case Op::kValidate:
    case Op::kPing:
    case Op::kWait:
    case Op::kCancelWait:
    case Op::kWatchKey:
      return handle_session(r);
    case Op::kSet:
    case Op::kAppend:
    case Op::kMultiSet:
    case Op::kQueuePush:
    case Op::kCompareSet:
    case Op::kAdd:
    case Op::kBarrier:
      return handle_write(r);
    default:
      return handle_read(r);
  }
}

Status Connection::handle_session(Request& r) {
  StoreEngine& engine = state_->engine;
  switch (r.op) {
    case Op::kValidate:
      if (validated_) return Status::malformed("a second VALIDATE on one connection");
      if (r.number != kValidationMagic) {
        return Status::malformed(fmt::format("VALIDATE with magic {:#x}", r.number));
      }
      validated_ = true;
      return Status();
    case Op::kPing:
      reply(encode_u32(r.number));
      return Status();
    case Op::kWait:
      if (engine.wait(*this, r.keys)) reply(encode_wait(WaitReply::kStopWaiting));
      return Status();
    case Op::kCancelWait:
      engine.cancel_wait(*this);
      reply(encode_wait(WaitReply::kWaitCanceled));
      return Status();
    case Op::kWatchKey:
      engine.watch(*this, r.keys[0]);
      reply(encode_watch_registered());
      return Status();
    default:
      return Status::malformed(fmt::format("{} is not handled", op_name(r.op)));
  }
}

// Queries with a reply that write nothing, plus the two that remove (delete, queue_pop): none
// of them can be refused.
Status Connection::handle_read(Request& r) {
  StoreEngine& engine = state_->engine;
  switch (r.op) {
    case Op::kGet:
      reply(encode_value(engine.get(r.keys[0]).value_or(std::string())));
      return Status();
    case Op::kMultiGet: {
      std::string out;
      for (const auto& key : r.keys) out += encode_value(engine.get(key).value_or(std::string()));
      reply(std::move(out));
      return Status();
    }
    case Op::kCheck:
      reply(encode_check(engine.check(r.keys) ? CheckReply::kReady : CheckReply::kNotReady));
      return Status();
    case Op::kNumKeys:
      reply(encode_i64(engine.num_keys()));
      return Status();
    case Op::kListKeys:
      reply(encode_keys(engine.list_keys()));
      return Status();
    case Op::kDeleteKey:
      reply(encode_i64(engine.erase(r.keys[0]) ? 1 : 0));
      return Status();
    case Op::kQueuePop: {
      StoreEngine::Popped popped = engine.queue_pop(r.keys[0]);
      reply(encode_queue_pop(popped.length_before, popped.value));
      return Status();
    }
    case Op::kQueueLen:
      reply(encode_i64(engine.queue_len(r.keys[0])));
      return Status();
    default:
      return Status::malformed(fmt::format("{} is not handled", op_name(r.op)));
  }
}

// Writes, which the store's limits may refuse.
Status Connection::handle_write(Request& r) {
  StoreEngine& engine = state_->engine;
  switch (r.op) {
    case Op::kSet:
      return engine.set(r.keys[0], std::move(r.values[0]));
    case Op::kAppend:
      return engine.append(r.keys[0], r.values[0]);
    case Op::kMultiSet:
      return engine.multi_set(r.keys, std::move(r.values));
    case Op::kQueuePush:
      return engine.queue_push(r.keys[0], std::move(r.values[0]));
    case Op::kCompareSet: {
      auto now = engine.compare_set(r.keys[0], r.values[0], std::move(r.values[1]));
      if (!now) return now.status();
      reply(encode_value(*now));
      return Status();
    }
    case Op::kAdd: {
      auto sum = engine.add(r.keys[0], r.delta);
      if (!sum) return sum.status();
      reply(encode_i64(*sum));
      return Status();
    }
    case Op::kBarrier: {
      auto reached = engine.barrier(*this, r.keys[0], r.delta);
      if (!reached) return reached.status();
      if (*reached) reply(encode_wait(WaitReply::kStopWaiting));
      return Status();  // otherwise wait_done() answers when the last one arrives
    }
    default:
      return Status::malformed(fmt::format("{} is not handled", op_name(r.op)));
  }
}

void Connection::wait_done() { reply(encode_wait(WaitReply::kStopWaiting)); }

void Connection::key_changed(const WatchEvent& event) { reply(encode_watch_event(event)); }

void Connection::reply(std::string_view bytes) {
  if (!open_) return;
  if (outbox_.size() + bytes.size() > state_->options.max_outbox_bytes) {
    return drop(fmt::format("its unread replies exceed max_outbox_bytes ({} bytes queued, max {})",
                            outbox_.size() + bytes.size(), state_->options.max_outbox_bytes),
                &StoreStats::slow_readers_dropped);
  }
  outbox_.append(bytes);
  if (!decoding_) flush();
}

// A reply is a few bytes and the socket's buffer almost always has room: a send now costs one
// system call, where a write through the reactor cost a wake-up, an epoll registration for
// writability and a coroutine resumption per reply.
void Connection::flush() {
  if (!open_ || writing_ || outbox_.empty()) return;
  boost::system::error_code ec;
  size_t sent = socket_.send(asio::buffer(outbox_), 0, ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    ec.clear();
    sent = 0;
  }
  if (ec) {
    if (ec != asio::error::broken_pipe && ec != asio::error::connection_reset) {
      spdlog::debug("store: writing to {} failed: {}", peer(), ec.message());
    }
    return close();
  }
  if (sent == outbox_.size()) {
    outbox_.clear();
    if (outbox_.capacity() > ReadBuffer::kKeepAtMost) outbox_.shrink_to_fit();
    return;
  }
  // The client is not reading as fast: the rest goes when the socket can take it, and replies
  // made meanwhile queue in outbox_ (bounded by max_outbox_bytes).
  sending_.assign(outbox_, sent);
  outbox_.clear();
  writing_ = true;
  asio::async_write(socket_, asio::buffer(sending_),
                    [self = shared_from_this()](const boost::system::error_code& error, size_t) {
                      self->written(error);
                    });
}

void Connection::written(const boost::system::error_code& ec) {
  writing_ = false;
  sending_ = std::string();  // a reply large enough to wait is not kept around
  if (ec) {
    if (open_) spdlog::debug("store: writing to {} failed: {}", peer(), ec.message());
    return close();
  }
  flush();
}

void Connection::drop(const std::string& why, uint64_t StoreStats::*counter) {
  if (!open_) return;
  if (counter) ++(state_->counters.*counter);
  spdlog::warn("store: closing the connection of {} {}: {}", dialect_label(dialect_), peer(), why);
  close();
}

void Connection::arm_partial_timer() {
  const auto timeout = state_->options.partial_query_timeout;
  if (in_.empty() || timeout.count() <= 0) {
    // Most reads end on a whole query: cancelling only a wait that exists keeps the timer
    // queue out of their way.
    if (std::exchange(partial_armed_, false)) partial_timer_.cancel();
    return;
  }
  partial_armed_ = true;
  partial_timer_.expires_after(timeout);
  partial_timer_.async_wait([weak = weak_from_this(), timeout](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    self->drop(fmt::format("it sent part of a query, then nothing for {} ms", timeout.count()),
               &StoreStats::stalled_dropped);
  });
}

void Connection::close() {
  if (!open_) return;
  open_ = false;
  boost::system::error_code ignored;
  // Tells the client even if a child forked before exec still holds the descriptor; needless
  // when it hung up itself.
  if (!peer_closed_) socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  if (partial_armed_) partial_timer_.cancel();
}

void Connection::finish() {
  if (finished_) return;
  finished_ = true;
  close();
  state_->engine.forget(*this);
  if (on_end_) std::exchange(on_end_, nullptr)();
}

}  // namespace ddprun::store::detail
