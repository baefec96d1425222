#include "rendezvous/security/provider.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace ddprun::rdzv {
namespace {

constexpr const char* kModuleName = "libddprun_security.so";
#ifdef DDPRUN_SECURITY_MODULE_FROM_BINDIR
constexpr const char* kModuleFromProgramDir = DDPRUN_SECURITY_MODULE_FROM_BINDIR;
#else
constexpr const char* kModuleFromProgramDir = "../lib/ddprun";
#endif

std::string program_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// Where the module may be, in order: the environment's choice, beside an installed program,
// then where this build put it.
std::vector<std::string> candidates() {
  std::vector<std::string> paths;
  if (const char* chosen = std::getenv("DDPRUN_SECURITY_MODULE"); chosen && *chosen) {
    paths.emplace_back(chosen);
    return paths;
  }
  // Relative first: a relocated install (a wheel in any environment, a package built with
  // another prefix than its build) finds its own module, not another install's.
  if (const std::string dir = program_dir(); !dir.empty()) {
    paths.push_back(dir + "/" + kModuleFromProgramDir + "/" + kModuleName);
  }
#ifdef DDPRUN_SECURITY_MODULE_INSTALLED
  paths.emplace_back(DDPRUN_SECURITY_MODULE_INSTALLED);
#endif
#ifdef DDPRUN_SECURITY_MODULE_BUILT
  paths.emplace_back(DDPRUN_SECURITY_MODULE_BUILT);
#endif
  return paths;
}

Result<const SecurityProvider*> load() {
  std::vector<std::string> failures;
  for (const std::string& path : candidates()) {
    if (::access(path.c_str(), F_OK) != 0) {
      failures.push_back(path + ": not there");
      continue;
    }
    void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!module) {
      failures.push_back(::dlerror());
      continue;
    }
    using Entry = const SecurityProvider* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(module, "ddprun_security_provider_v1"));
    if (!entry) {
      failures.push_back(path + ": no ddprun_security_provider_v1 (a module of another version?)");
      continue;
    }
    return entry();  // the module stays loaded for the life of the process
  }
  return Status::error(fmt::format(
      "cannot load the OpenSSL module {} that tokens and TLS need ({}); reinstall ddprun or set "
      "DDPRUN_SECURITY_MODULE to its path",
      kModuleName, fmt::join(failures, "; ")));
}

}  // namespace

Result<const SecurityProvider*> security_provider() {
  static std::once_flag once;
  static Result<const SecurityProvider*> loaded = Status::error("not loaded");
  std::call_once(once, [] { loaded = load(); });
  return loaded;
}

}  // namespace ddprun::rdzv
