#include "rendezvous/client/client.h"

#include <spdlog/spdlog.h>

#include "rendezvous/wire/payload_codec.h"

namespace ddprun::rdzv {

// The rendezvous side of a client: membership (node id, token), the pending join, the last
// assignment and the event handler. The channel's hooks reach it through a weak pointer.
struct TcpRendezvousClient::State {
  std::function<void(const RendezvousEvent&)> handler;
  std::optional<RoundAssignment> assignment;
  std::function<void(Result<RoundAssignment>)> join_done;
  std::string node_id;
  uint64_t token = 0;          // membership token from the join reply; 0 = not a member
  bool job_over = false;       // JobSucceeded/JobFailed arrived
  Channel* channel = nullptr;  // set once the channel exists; the client owns both

  void finish_join(Result<RoundAssignment> result) {
    if (!join_done) return;
    channel->deliver(
        [done = std::exchange(join_done, nullptr), result = std::move(result)] { done(result); });
  }
  void emit(RendezvousEvent event) {
    channel->deliver([this, event = std::move(event)] {
      if (handler) handler(event);
    });
  }
  void on_message(ServerMessage&& message);
};

void TcpRendezvousClient::State::on_message(ServerMessage&& message) {
  std::visit(
      [&](auto&& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, RoundAssigned>) {
          // With a successor to move to, a server whose process is gone is given up at once
          // (channel.h, "gone server"): the move need not wait for heartbeat_timeout.
          channel->set_give_up_when_gone(!m.successor_host.empty() && m.successor_port != 0);
          assignment = m;
          finish_join(m);
        } else if constexpr (std::is_same_v<M, RestartRequested>) {
          emit(m);
        } else if constexpr (std::is_same_v<M, JobFailed>) {
          job_over = true;
          channel->expect_close();
          finish_join(Status::refused(m.message));
          emit(m);
        } else if constexpr (std::is_same_v<M, JobSucceeded>) {
          job_over = true;
          channel->expect_close();
          finish_join(Status::refused("the job has already succeeded"));
          emit(m);
        } else if constexpr (std::is_same_v<M, ErrorMsg>) {
          spdlog::log(job_over ? spdlog::level::debug : spdlog::level::warn,
                      "rendezvous server closes our connection: {}", m.message);
        } else if constexpr (std::is_same_v<M, Redirect>) {
          // A replica that stopped leading: the reconnect finds the leader (channel.h).
          spdlog::info("rendezvous server no longer leads (leader: {}); reconnecting",
                       m.host.empty() ? std::string("being elected")
                                      : to_string(ServerAddress{m.host, m.port}));
        }
      },
      std::move(message));
}

TcpRendezvousClient::TcpRendezvousClient(boost::asio::io_context& io, ClientOptions options,
                                         const Clock& clock)
    : io_(io), options_(std::move(options)), clock_(clock) {
  open_channel();
}

void TcpRendezvousClient::open_channel() {
  auto handler = state_ ? std::move(state_->handler) : nullptr;
  state_ = std::make_shared<State>();
  state_->handler = std::move(handler);
  Channel::Hooks hooks;
  std::weak_ptr<State> weak = state_;
  hooks.on_message = [weak](ServerMessage&& m) {
    if (auto s = weak.lock()) s->on_message(std::move(m));
  };
  // After a reconnect, the membership token proves we are the same node.
  hooks.resume_request = [weak](uint32_t id,
                                uint64_t pushes_received) -> std::optional<ClientMessage> {
    auto s = weak.lock();
    if (!s || s->token == 0) return std::nullopt;
    return ClientMessage(ResumeMsg{id, s->node_id, s->token, pushes_received});
  };
  hooks.on_lost = [weak](const std::string& why) {
    auto s = weak.lock();
    if (!s) return;
    s->finish_join(Status::unavailable(why));
    s->emit(ConnectionLost{why});
  };
  channel_ = Channel::create(io_, options_, std::move(hooks), clock_);
  state_->channel = channel_.get();
}

bool TcpRendezvousClient::lost_in_good_standing(Millis heartbeat_timeout) const {
  return channel_->silence_at_loss() < heartbeat_timeout;
}

void TcpRendezvousClient::move_to(const ServerAddress& server) {
  channel_->abort();  // no callback of the old channel runs afterwards
  options_.host = server.host;
  options_.port = server.port;
  options_.more_servers.clear();
  open_channel();
}

TcpRendezvousClient::~TcpRendezvousClient() { channel_->abort(); }

void TcpRendezvousClient::set_event_handler(std::function<void(const RendezvousEvent&)> handler) {
  state_->handler = std::move(handler);
}

void TcpRendezvousClient::connect(std::function<void(Status)> done) {
  channel_->connect(std::move(done));
}

void TcpRendezvousClient::join(JoinRequest request,
                               std::function<void(Result<RoundAssignment>)> done) {
  if (state_->join_done) {
    return channel_->deliver(
        [done] { done(Status::error("join() while another join is pending")); });
  }
  const uint32_t id = channel_->next_request_id();
  state_->node_id = request.node.node_id;
  state_->join_done = std::move(done);
  channel_->request(JoinMsg{id, std::move(request.node), request.job, request.standby_port,
                            request.restarts_used, request.survivors},
                    id, [state = state_](const Reply& r) {
                      if (r.ok) {
                        state->token = static_cast<uint64_t>(r.integer);
                      } else if (r.integer == kJoinRefusedHostExcluded) {
                        // This host left a job unfit: kept out, not a failure of the join.
                        state->finish_join(Status::excluded(r.error));
                      } else {
                        state->finish_join(Status::refused(r.error));
                      }
                    });
}

namespace {
// Adapts a Reply to a Status callback (absent callbacks are fine).
std::function<void(const Reply&)> status_of(std::function<void(Status)> done) {
  return [done = std::move(done)](const Reply& r) {
    if (done) done(r.ok ? Status() : Status::error(r.error));
  };
}
}  // namespace

void TcpRendezvousClient::report_worker_failure(std::string failure_report, int32_t exit_code,
                                                std::function<void(Status)> done,
                                                std::string not_restartable) {
  const uint32_t id = channel_->next_request_id();
  const uint64_t round = state_->assignment ? state_->assignment->round : 0;
  channel_->request(
      ReportFailureMsg{id, round, std::move(failure_report), exit_code, std::move(not_restartable)},
      id, status_of(std::move(done)));
}

void TcpRendezvousClient::report_success(std::function<void(Status)> done) {
  const uint32_t id = channel_->next_request_id();
  const uint64_t round = state_->assignment ? state_->assignment->round : 0;
  channel_->request(ReportSuccessMsg{id, round}, id, status_of(std::move(done)));
}

void TcpRendezvousClient::share_progress(std::vector<RankProgressEntry> ranks,
                                         uint32_t straggler_threshold_milli,
                                         std::function<void(Result<StragglerFinding>)> done) {
  const uint64_t round = state_->assignment ? state_->assignment->round : 0;
  const uint32_t id = channel_->next_request_id();
  channel_->request(ProgressMsg{id, round, straggler_threshold_milli, std::move(ranks)}, id,
                    [done = std::move(done), limits = channel_->options().limits](const Reply& r) {
                      if (!done) return;
                      if (!r.ok) return done(Status::error(r.error));
                      if (r.payload.empty()) return done(StragglerFinding{});
                      done(decode_stragglers(r.payload, limits));
                    });
}

void TcpRendezvousClient::job_progress(
    std::function<void(Result<std::vector<NodeProgress>>)> done) {
  const uint32_t id = channel_->next_request_id();
  channel_->request(ProgressQueryMsg{id}, id,
                    [done = std::move(done), limits = channel_->options().limits](const Reply& r) {
                      if (!r.ok) return done(Status::error(r.error));
                      done(decode_job_progress(r.payload, limits));
                    });
}

void TcpRendezvousClient::close(std::function<void()> done) {
  channel_->close([](uint32_t id) { return ClientMessage(LeaveMsg{id, {}}); }, std::move(done));
}

void TcpRendezvousClient::close_excluded(std::string reason, std::function<void()> done) {
  channel_->close(
      [reason = std::move(reason)](uint32_t id) {
        return ClientMessage(LeaveMsg{id, reason});
      },
      std::move(done));
}

bool TcpRendezvousClient::connected() const { return channel_->connected(); }

const std::optional<RoundAssignment>& TcpRendezvousClient::assignment() const {
  return state_->assignment;
}

}  // namespace ddprun::rdzv
