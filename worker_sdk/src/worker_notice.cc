#include "worker_sdk/src/worker_notice.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

namespace ddp::detail {
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

std::string worker_notice(const std::string& event, const std::string& reason, int local_rank,
                          int pid) {
  std::size_t limit = reason.size();
  while (true) {
    nlohmann::json notice = {{"event", event},
                             {"local_rank", local_rank},
                             {"pid", pid},
                             {"reason", reason.substr(0, limit)}};
    std::string text = notice.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() <= kMaxNoticeBytes || limit == 0) return text;
    limit /= 2;
  }
}

void tell_agent_and_exit(const char* event, const char* caller, const std::string& reason,
                         int exit_code) noexcept {
  const char* path = std::getenv(kWorkerSocketVariable);
  bool told = false;
  if (path != nullptr && *path != '\0') {
    try {
      told = send_notice(path,
                         worker_notice(event, reason, local_rank(), static_cast<int>(::getpid())));
    } catch (...) {
      told = false;  // out of memory building the notice: the exit code still says it
    }
  }
  if (!told) std::fprintf(stderr, "%s: %s\n", caller, reason.c_str());
  std::fflush(nullptr);
  std::_Exit(exit_code);
}

}  // namespace ddp::detail
