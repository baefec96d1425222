#include "common/private_dir.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ddprun {

Result<std::string> make_private_dir(std::string_view prefix, std::string_view what) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/" + std::string(prefix) + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return Status::error("cannot create a directory for " + std::string(what) + " under " +
                         pattern.substr(0, pattern.rfind('/')) + ": " + std::strerror(errno));
  }
  return pattern;
}

}  // namespace ddprun
