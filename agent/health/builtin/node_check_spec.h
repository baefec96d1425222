// What `--health_check` asks for (issue 38): a user's shell command, ddprun's built-in node
// checks, or both. The value is one string, as it was before built-in checks existed:
//
//   ./site-check.sh                              a shell command (run by /bin/sh -c)
//   builtin:gpu,nic,path=/data                   built-in checks only
//   builtin:gpu=8,path=/data:min_free=50G  ./site-check.sh --strict
//                                                built-in checks, then the command
//
// Built-in items, joined by commas (no spaces: the first space ends them):
//   gpu            every GPU healthy (NVML for NVIDIA, sysfs RAS counters for AMD); at least one
//   gpu=N          ... and exactly N of them
//   nic            the interface carrying the node's address up with carrier, and every
//                  InfiniBand port ACTIVE
//   nic=eth0+ib0   the named interfaces ('+'-separated): network interfaces up with carrier,
//                  InfiniBand devices with every port ACTIVE
//   path=/data[:min_free=10G]
//                  readable and writable, and (optionally) at least that much free space
//                  (bytes, or K/M/G/T: powers of 1024); may be given more than once
//
// Pure: no I/O. The agent checks the value when the flag is read, and the check's own child
// process (node_check_main.h) parses the same items again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ddprun::agent::builtin {

inline constexpr std::string_view kBuiltinPrefix = "builtin:";

struct GpuCheckSpec {
  std::optional<int> expected_count;  // gpu=N; unset: at least one GPU
};

struct NicCheckSpec {
  std::vector<std::string> names;  // nic=a+b; empty: the node's own interface and every IB port
};

struct PathCheckSpec {
  std::string path;
  uint64_t min_free_bytes = 0;  // 0: free space is not checked
};

// The built-in items of one `--health_check` value.
struct NodeCheckSpec {
  std::optional<GpuCheckSpec> gpu;
  std::optional<NicCheckSpec> nic;
  std::vector<PathCheckSpec> paths;  // in the order given

  bool empty() const { return !gpu && !nic && paths.empty(); }
};

// A `--health_check` value taken apart.
struct HealthCheckValue {
  std::string builtin;  // the built-in items ("gpu,path=/data"), without "builtin:"; empty: none
  std::string command;  // the shell command; empty: none
};

// Splits `value` into its built-in items (checked: an unknown item or a bad size is an error
// naming it) and its command.
Result<HealthCheckValue> split_health_check(const std::string& value);

// Parses built-in items ("gpu=8,nic,path=/data:min_free=10G"). Errors name the item and why.
Result<NodeCheckSpec> parse_node_checks(std::string_view items);

// "10G" -> 10 * 2^30; plain digits are bytes. Errors name the text.
Result<uint64_t> parse_byte_size(std::string_view text);

}  // namespace ddprun::agent::builtin
