#include "agent/health/builtin/sysfs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace ddprun::agent::builtin {

std::string sysfs_root(const char* from_env) {
  return from_env != nullptr && *from_env != '\0' ? std::string(from_env) : kSysfsDefaultRoot;
}

std::optional<std::string> read_attribute(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> list_directory(const std::string& path) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ddprun::agent::builtin
