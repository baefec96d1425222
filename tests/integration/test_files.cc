#include "tests/integration/test_files.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "common/posix_fd.h"

namespace ddprun::testing {
namespace fs = std::filesystem;

bool wait_for_file(const std::string& path, Deadline deadline) {
  const std::string dir = fs::path(path).parent_path().string();
  UniqueFd inotify(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!inotify.valid()) return false;
  // Watch first, then look: a file created in between is seen either way.
  if (::inotify_add_watch(inotify.get(), dir.c_str(), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) <
      0) {
    return false;
  }
  for (;;) {
    if (::access(path.c_str(), F_OK) == 0) return true;
    pollfd p{inotify.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (ready == 0) return ::access(path.c_str(), F_OK) == 0;
    if (ready < 0 && errno != EINTR) return false;
    char events[4096];
    while (::read(inotify.get(), events, sizeof events) > 0) {
    }
  }
}

bool wait_for_files(const std::vector<std::string>& paths, Deadline deadline) {
  return std::all_of(paths.begin(), paths.end(),
                     [deadline](const std::string& p) { return wait_for_file(p, deadline); });
}

void write_text_file(const std::string& path, const std::string& text, unsigned mode) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  ::chmod(temp.c_str(), mode);
  fs::rename(temp, path);
}

void make_fifo(const std::string& path) {
  if (::mkfifo(path.c_str(), 0600) != 0) {
    throw std::system_error(errno, std::generic_category(), "mkfifo " + path);
  }
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ddprun::testing
