#include "common/posix_fd.h"

#include <unistd.h>

namespace ddprun {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // close errors on a descriptor we own carry no useful action
  fd_ = fd;
}

}  // namespace ddprun
