#include "common/posix_fd.h"

#include <fcntl.h>
#include <unistd.h>

namespace ddprun {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // close errors on a descriptor we own carry no useful action
  fd_ = fd;
}

void set_cloexec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

}  // namespace ddprun
