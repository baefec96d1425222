#include "agent/process/worker_channel.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log_throttle.h"
#include "common/posix_fd.h"
#include "common/private_dir.h"

namespace ddprun::agent {
namespace {

constexpr std::size_t kMaxMessageChars = 2000;
// Datagrams read per wake-up before the loop gets a turn.
constexpr int kMaxReadsPerWakeup = 64;

std::string errno_text() { return std::strerror(errno); }

}  // namespace

Result<WorkerNotice> parse_worker_notice(std::string_view datagram, pid_t sender) {
  if (datagram.size() > kMaxNoticeBytes) {
    return Status::invalid_argument("worker notice of " + std::to_string(datagram.size()) +
                                    " bytes (at most " + std::to_string(kMaxNoticeBytes) + ")");
  }
  const nlohmann::json notice = nlohmann::json::parse(datagram, nullptr, false);
  if (!notice.is_object()) return Status::invalid_argument("worker notice is not a JSON object");
  const auto event = notice.find("event");
  if (event == notice.end() || !event->is_string()) {
    return Status::invalid_argument("worker notice without an \"event\" string");
  }
  WorkerNotice parsed;
  const char* text_key = "message";
  if (*event == "exception") {
    parsed.kind = WorkerNotice::Kind::kException;
  } else if (*event == "stop_job") {
    parsed.kind = WorkerNotice::Kind::kStopJob;
    text_key = "reason";
  } else if (*event == "exclude_node") {
    parsed.kind = WorkerNotice::Kind::kExcludeNode;
    text_key = "reason";
  } else {
    return Status::invalid_argument("worker notice of unknown event " + event->dump());
  }
  parsed.pid = sender;
  const auto local_rank = notice.find("local_rank");
  if (local_rank != notice.end() && local_rank->is_number_integer()) {
    const auto r = local_rank->get<int64_t>();
    if (r >= 0 && r < 1'000'000) parsed.local_rank = static_cast<int>(r);
  }
  const auto text = notice.find(text_key);
  if (text != notice.end() && text->is_string()) {
    parsed.message = text->get<std::string>().substr(0, kMaxMessageChars);
  }
  if (parsed.kind != WorkerNotice::Kind::kException && parsed.message.empty()) {
    parsed.message = "no reason given";
  }
  return parsed;
}

struct UnixWorkerChannel::Impl : std::enable_shared_from_this<Impl> {
  explicit Impl(boost::asio::io_context& io) : socket(io), throttle(3, Millis(10'000)) {}

  void wait() {
    std::weak_ptr<Impl> weak = weak_from_this();
    socket.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                      [weak](const boost::system::error_code& ec) {
                        auto self = weak.lock();
                        if (!self || ec) return;
                        if (self->read_all()) self->wait();
                      });
  }

  // Reads what is queued (bounded); false when the socket failed.
  bool read_all() {
    std::array<char, kMaxNoticeBytes + 1> buffer;
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(ucred))> control;
    for (int reads = 0; reads < kMaxReadsPerWakeup; ++reads) {
      iovec iov{buffer.data(), buffer.size()};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      const ssize_t n = ::recvmsg(socket.native_handle(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n < 0) {
        spdlog::warn("worker channel {}: {}; failures are known at the workers' exits", path,
                     errno_text());
        return false;
      }
      pid_t sender = -1;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
          ucred cred{};
          std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
          sender = cred.pid;
        }
      }
      const std::string_view datagram(buffer.data(), static_cast<std::size_t>(n));
      auto notice = (msg.msg_flags & MSG_TRUNC)
                        ? Result<WorkerNotice>(Status::invalid_argument("worker notice too long"))
                        : parse_worker_notice(datagram, sender);
      if (!notice) {
        uint64_t suppressed = 0;
        if (throttle.allow(SystemClock::instance().steady_now(), suppressed)) {
          spdlog::warn("worker channel: dropped a notice from pid {}: {}", sender,
                       notice.error_message());
        }
        continue;
      }
      if (handler) handler(*notice);
    }
    return true;
  }

  boost::asio::posix::stream_descriptor socket;
  LogThrottle throttle;
  std::string dir;
  std::string path;
  Handler handler;
};

Result<std::unique_ptr<UnixWorkerChannel>> UnixWorkerChannel::open(boost::asio::io_context& io) {
  auto dir = make_private_dir("ddprun-channel", "the worker channel");
  if (!dir) return dir.status();
  const std::string pattern = *dir;
  auto impl = std::make_shared<Impl>(io);
  impl->dir = pattern;
  std::unique_ptr<UnixWorkerChannel> channel(new UnixWorkerChannel(impl));  // removes the dir
  impl->path = pattern + "/agent.sock";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (impl->path.size() >= sizeof(address.sun_path)) {
    return Status::error("the worker channel's path is too long: " + impl->path +
                         " (set TMPDIR to a shorter directory)");
  }
  std::memcpy(address.sun_path, impl->path.c_str(), impl->path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Status::error("worker channel: socket: " + errno_text());
  const int on = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0 ||
      ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return Status::error("worker channel: cannot bind " + impl->path + ": " + errno_text());
  }
  boost::system::error_code ec;
  impl->socket.assign(fd.get(), ec);
  if (ec) return Status::error("worker channel: " + ec.message());
  fd.release();
  impl->wait();
  return channel;
}

UnixWorkerChannel::UnixWorkerChannel(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

UnixWorkerChannel::~UnixWorkerChannel() {
  boost::system::error_code ignored;
  if (impl_->socket.is_open()) impl_->socket.close(ignored);
  std::error_code also_ignored;
  std::filesystem::remove_all(impl_->dir, also_ignored);
}

void UnixWorkerChannel::set_handler(Handler handler) { impl_->handler = std::move(handler); }

std::vector<std::pair<std::string, std::string>> UnixWorkerChannel::worker_env() const {
  return {{kWorkerSocketEnv, impl_->path}};
}

}  // namespace ddprun::agent
