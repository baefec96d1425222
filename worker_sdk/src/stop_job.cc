#include "ddp/stop_job.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "worker_sdk/src/stop_job_notice.h"

namespace ddp {
namespace {

constexpr std::size_t kMaxNoticeBytes = 8192;  // agent/process/worker_channel.h
constexpr const char* kWorkerSocketVariable = "DDPRUN_WORKER_SOCKET";

// Sends `datagram` to the socket at `path`; false when it could not be sent.
bool send_notice(const char* path, const std::string& datagram) noexcept {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::size_t length = std::strlen(path);
  if (length >= sizeof(address.sun_path)) return false;
  std::memcpy(address.sun_path, path, length + 1);
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  const ssize_t sent = ::sendto(fd, datagram.data(), datagram.size(), 0,
                                reinterpret_cast<const sockaddr*>(&address), sizeof address);
  ::close(fd);
  return sent == static_cast<ssize_t>(datagram.size());
}

int local_rank() noexcept {
  const char* text = std::getenv("LOCAL_RANK");
  return text != nullptr && *text != '\0' ? std::atoi(text) : -1;
}

}  // namespace

namespace detail {
std::string stop_job_notice(const std::string& reason, int local_rank, int pid) {
  // Invalid UTF-8 is replaced, never thrown on; a long reason is halved until it fits.
  std::size_t limit = reason.size();
  while (true) {
    nlohmann::json notice = {{"event", "stop_job"},
                             {"local_rank", local_rank},
                             {"pid", pid},
                             {"reason", reason.substr(0, limit)}};
    std::string text = notice.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() <= kMaxNoticeBytes || limit == 0) return text;
    limit /= 2;
  }
}
}  // namespace detail

void stop_job(const std::string& reason) noexcept {
  const char* path = std::getenv(kWorkerSocketVariable);
  bool told = false;
  if (path != nullptr && *path != '\0') {
    try {
      told = send_notice(
          path, detail::stop_job_notice(reason, local_rank(), static_cast<int>(::getpid())));
    } catch (...) {
      told = false;  // out of memory building the notice: the exit code still says it
    }
  }
  if (!told) std::fprintf(stderr, "ddp::stop_job: %s\n", reason.c_str());
  std::fflush(nullptr);
  std::_Exit(kExitDoNotRequeue);
}

}  // namespace ddp
