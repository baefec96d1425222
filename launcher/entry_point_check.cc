#include "launcher/entry_point_check.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <vector>

#include "common/suggest.h"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

// The names in the directory a missing script was looked for in, for "did you mean".
std::vector<std::string> neighbours(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
    if (names.size() >= 1000) break;  // a huge directory: enough to suggest from
  }
  return names;
}

}  // namespace

Status check_entry_point(const agent::WorkerCommand& command, const std::string& cwd) {
  // argv: python -u <script|-m module> ...
  if (!command.python || command.argv.size() < 3) return {};
  const std::string& script = command.argv[2];
  if (script == "-m" || script == "-c" || script == "-") return {};
  const fs::path path = fs::path(script).is_absolute() ? fs::path(script) : fs::path(cwd) / script;
  const std::string where = fs::path(script).is_absolute() ? "" : " (in " + cwd + ")";
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    const fs::path name = fs::path(script).filename();
    return Status::invalid_argument("the script '" + script + "' does not exist" + where +
                                    did_you_mean(name.string(), neighbours(path.parent_path())) +
                                    "; no worker was started");
  }
  if (fs::is_directory(status) && !fs::exists(path / "__main__.py", ec)) {
    return Status::invalid_argument("the entry point '" + script + "' is a directory without a " +
                                    "__main__.py" + where + "; Python cannot run it");
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return Status::invalid_argument("the script '" + script + "' is not readable" + where +
                                    " (check its permissions)");
  }
  return {};
}

}  // namespace ddprun::launcher
