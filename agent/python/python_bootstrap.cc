#include "agent/python/python_bootstrap.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "agent/python/python_bootstrap_sources.h"
#include "common/posix_fd.h"
#include "common/private_dir.h"

namespace ddprun::agent {
namespace {

Status write_private_file(const std::string& path, std::string_view content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Status::error("cannot create " + path + ": " + std::strerror(errno));
  while (!content.empty()) {
    const ssize_t n = ::write(fd.get(), content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::error("cannot write " + path + ": " + std::strerror(errno));
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

}  // namespace

Status write_python_bootstrap(const std::string& dir) {
  for (const PythonSource& source : python_bootstrap_sources()) {
    const std::string path = dir + "/" + std::string(source.name);
    if (Status s = write_private_file(path, source.text); !s) return s;
  }
  return {};
}

Result<std::unique_ptr<PythonBootstrap>> PythonBootstrap::create() {
  auto dir = make_private_dir("ddprun-python", "the Python workers' bootstrap");
  if (!dir) return dir.status();
  std::unique_ptr<PythonBootstrap> bootstrap(new PythonBootstrap(*dir));
  if (Status s = write_python_bootstrap(*dir); !s) return s;
  return bootstrap;
}

PythonBootstrap::~PythonBootstrap() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::vector<std::string> PythonBootstrap::wrap(const std::vector<std::string>& argv) const {
  // What the launcher builds for a Python entry point: {python, "-u", ["-m",] target, ...}.
  if (argv.size() < 3 || argv[1] != "-u") return argv;
  std::vector<std::string> wrapped = argv;
  wrapped.insert(wrapped.begin() + 2, program());
  return wrapped;
}

}  // namespace ddprun::agent
