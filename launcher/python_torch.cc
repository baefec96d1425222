#include "launcher/python_torch.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

// <dir>/lib/python3.*/<leaf>, newest Python first.
std::vector<fs::path> versioned_dirs(const fs::path& prefix, const std::string& leaf) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(prefix / "lib", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("python3.", 0) == 0) out.push_back(entry.path() / leaf);
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

void add_prefix_dirs(const fs::path& prefix, std::vector<fs::path>& dirs) {
  for (const char* leaf : {"site-packages", "dist-packages"}) {
    for (auto& d : versioned_dirs(prefix / "local", leaf)) dirs.push_back(d);
    for (auto& d : versioned_dirs(prefix, leaf)) dirs.push_back(d);
  }
  dirs.push_back(prefix / "lib/python3/dist-packages");  // Debian's shared directory
}

// The value of `key` in a virtual environment's pyvenv.cfg ("key = value" lines).
std::optional<std::string> venv_setting(const fs::path& cfg, const std::string& key) {
  std::ifstream in(cfg);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t\r") + 1);
      return s;
    };
    if (trim(line.substr(0, eq)) == key) return trim(line.substr(eq + 1));
  }
  return std::nullopt;
}

std::vector<fs::path> search_path(const std::string& python,
                                  const std::map<std::string, std::string>& env) {
  std::vector<fs::path> dirs;
  if (auto it = env.find("PYTHONPATH"); it != env.end()) {
    std::stringstream parts(it->second);
    for (std::string part; std::getline(parts, part, ':');) {
      if (!part.empty()) dirs.emplace_back(part);
    }
  }
  if (auto it = env.find("HOME"); it != env.end() && env.find("PYTHONNOUSERSITE") == env.end()) {
    for (auto& d : versioned_dirs(fs::path(it->second) / ".local", "site-packages")) {
      dirs.push_back(d);
    }
  }
  const fs::path prefix = fs::path(python).parent_path().parent_path();
  const fs::path cfg = prefix / "pyvenv.cfg";
  std::error_code ec;
  if (fs::exists(cfg, ec)) {
    for (auto& d : versioned_dirs(prefix, "site-packages")) dirs.push_back(d);
    const auto system = venv_setting(cfg, "include-system-site-packages");
    const auto home = venv_setting(cfg, "home");
    if (system == "true" && home) add_prefix_dirs(fs::path(*home).parent_path(), dirs);
    return dirs;
  }
  add_prefix_dirs(prefix, dirs);
  const fs::path resolved = fs::weakly_canonical(python, ec);
  if (!ec && resolved.parent_path().parent_path() != prefix) {
    add_prefix_dirs(resolved.parent_path().parent_path(), dirs);
  }
  return dirs;
}

// __version__ from torch/version.py: a line `__version__ = '1.13.1'`.
std::optional<std::string> read_version(const fs::path& file) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("__version__", 0) != 0) continue;
    const auto open = line.find_first_of("'\"");
    if (open == std::string::npos) return std::nullopt;
    const auto close = line.find(line[open], open + 1);
    if (close == std::string::npos) return std::nullopt;
    return line.substr(open + 1, close - open - 1);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> find_torch_version(const std::string& python,
                                              const std::map<std::string, std::string>& env) {
  for (const auto& dir : search_path(python, env)) {
    std::error_code ec;
    const fs::path version = dir / "torch" / "version.py";
    if (fs::exists(version, ec)) return read_version(version);
  }
  return std::nullopt;
}

std::optional<int> torch_major_version(const std::string& version) {
  int major = 0;
  std::size_t digits = 0;
  while (digits < version.size() && version[digits] >= '0' && version[digits] <= '9') {
    major = major * 10 + (version[digits] - '0');
    if (++digits > 4) return std::nullopt;
  }
  if (digits == 0) return std::nullopt;
  return major;
}

}  // namespace ddprun::launcher
