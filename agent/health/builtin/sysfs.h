// Reading /sys for the built-in checks, under a root that tests replace with a fake tree.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddprun::agent::builtin {

inline constexpr const char* kSysfsDefaultRoot = "/sys";
// The variable that names another root: for tests (a fake /sys tree), documented as such.
inline constexpr const char* kSysfsRootEnv = "DDPRUN_SYSFS_ROOT";

// The root to read, given the environment's value of kSysfsRootEnv (null or empty: /sys).
std::string sysfs_root(const char* from_env);

// A sysfs attribute's first line, without its newline; unset when it cannot be read (missing,
// or an attribute the driver refuses to answer, as `carrier` of an interface that is down).
std::optional<std::string> read_attribute(const std::string& path);
// Every line of an attribute (empty when it cannot be read).
std::vector<std::string> read_lines(const std::string& path);
// The names in a directory, sorted; empty when it does not exist.
std::vector<std::string> list_directory(const std::string& path);

}  // namespace ddprun::agent::builtin
