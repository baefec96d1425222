// `--health_check` values (agent/health/builtin/node_check_spec.h): a user's command, ddprun's
// built-in node checks ("builtin:gpu=8,nic=eth0+ib0,path=/data:min_free=10G"), or both.
//
// Properties: taking a value apart never fails but with kInvalidArgument naming the built-in
// item (or saying none was named); a value without the "builtin:" prefix is all command; the
// built-in part of an accepted value holds no space and parses to at least one check; and the
// checks any accepted item list parses to, written back in their canonical form, parse to the
// same checks.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/health/builtin/node_check_spec.h"
#include "fuzz/fuzz_check.h"

using namespace ddprun;
using namespace ddprun::agent::builtin;

namespace {

std::string canonical(const NodeCheckSpec& spec) {
  std::string text;
  const auto add = [&](const std::string& item) {
    if (!text.empty()) text += ',';
    text += item;
  };
  if (spec.gpu) {
    add(spec.gpu->expected_count ? "gpu=" + std::to_string(*spec.gpu->expected_count) : "gpu");
  }
  if (spec.nic) {
    std::string item = "nic";
    for (size_t i = 0; i < spec.nic->names.size(); ++i) {
      item += (i == 0 ? "=" : "+") + spec.nic->names[i];
    }
    add(item);
  }
  // min_free always written: the path itself may end in ":min_free=..." (rfind takes the last).
  for (const PathCheckSpec& path : spec.paths) {
    add("path=" + path.path + ":min_free=" + std::to_string(path.min_free_bytes));
  }
  return text;
}

bool same(const NodeCheckSpec& a, const NodeCheckSpec& b) {
  if (a.gpu.has_value() != b.gpu.has_value() || a.nic.has_value() != b.nic.has_value()) {
    return false;
  }
  if (a.gpu && a.gpu->expected_count != b.gpu->expected_count) return false;
  if (a.nic && a.nic->names != b.nic->names) return false;
  if (a.paths.size() != b.paths.size()) return false;
  for (size_t i = 0; i < a.paths.size(); ++i) {
    if (a.paths[i].path != b.paths[i].path ||
        a.paths[i].min_free_bytes != b.paths[i].min_free_bytes) {
      return false;
    }
  }
  return true;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string value(fuzz::as_text(data, size));

  auto split = split_health_check(value);
  if (!split) {
    FUZZ_CHECK(split.status().is_invalid_argument());
    FUZZ_CHECK(fuzz::starts_with(split.error_message(), "built-in check '") ||
               fuzz::starts_with(split.error_message(), "builtin: names no check"));
  } else if (split->builtin.empty()) {
    FUZZ_CHECK(split->command == value);  // no prefix: the whole value is the command
  } else {
    for (char c : split->builtin) FUZZ_CHECK(!is_space(c));
    FUZZ_CHECK(split->command.empty() || !is_space(split->command.front()));
    auto checks = parse_node_checks(split->builtin);
    FUZZ_CHECK(checks.ok() && !checks->empty());
  }

  // The item list alone, as the node check's child process parses it again.
  auto checks = parse_node_checks(value);
  if (!checks) {
    FUZZ_CHECK(checks.status().is_invalid_argument());
    return 0;
  }
  FUZZ_CHECK(!checks->empty());
  auto again = parse_node_checks(canonical(*checks));
  FUZZ_CHECK(again.ok() && same(*checks, *again));
  return 0;
}
