#include "agent/health/builtin/node_check_spec.h"

#include <cctype>
#include <charconv>
#include <limits>

#include <fmt/format.h>

namespace ddprun::agent::builtin {
namespace {

constexpr std::string_view kMinFree = ":min_free=";

std::vector<std::string_view> split_items(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

Status bad_item(std::string_view item, const std::string& why) {
  return Status::invalid_argument(fmt::format("built-in check '{}': {}", item, why));
}

Status add_gpu(std::string_view item, std::string_view value, NodeCheckSpec& spec) {
  if (spec.gpu) return bad_item(item, "gpu is given twice");
  spec.gpu.emplace();
  if (value.empty()) return {};
  int count = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), count);
  if (ec != std::errc() || end != value.data() + value.size() || count < 1 || count > 1024) {
    return bad_item(item, "gpu=N wants the number of GPUs this node must have (1 to 1024)");
  }
  spec.gpu->expected_count = count;
  return {};
}

Status add_nic(std::string_view item, std::string_view value, NodeCheckSpec& spec, bool has_value) {
  if (spec.nic) return bad_item(item, "nic is given twice");
  spec.nic.emplace();
  if (!has_value) return {};
  for (std::string_view name : split_items(value, '+')) {
    if (name.empty() || name.find('/') != std::string_view::npos || name == "." || name == "..") {
      return bad_item(item, "nic=a+b wants interface names, e.g. nic=eth0+mlx5_0");
    }
    spec.nic->names.emplace_back(name);
  }
  return {};
}

Status add_path(std::string_view item, std::string_view value, NodeCheckSpec& spec) {
  PathCheckSpec path;
  std::string_view where = value;
  if (const size_t at = value.rfind(kMinFree); at != std::string_view::npos) {
    where = value.substr(0, at);
    auto bytes = parse_byte_size(value.substr(at + kMinFree.size()));
    if (!bytes) return bad_item(item, bytes.error_message());
    path.min_free_bytes = *bytes;
  }
  if (where.empty() || where.front() != '/') {
    return bad_item(item, "path= wants an absolute path, e.g. path=/data:min_free=10G");
  }
  path.path = std::string(where);
  spec.paths.push_back(std::move(path));
  return {};
}

}  // namespace

Result<uint64_t> parse_byte_size(std::string_view text) {
  const auto fail = [&] {
    return Status::invalid_argument(fmt::format(
        "'{}' is not a size: bytes, or a number with K, M, G or T (powers of 1024)", text));
  };
  uint64_t number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data()) return fail();
  std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  int shift = 0;
  if (unit.size() > 1) return fail();
  if (unit.size() == 1) {
    const std::string_view units = "KMGT";
    const size_t index = units.find(static_cast<char>(std::toupper(unit[0])));
    if (index == std::string_view::npos) return fail();
    shift = 10 * static_cast<int>(index + 1);
  }
  if (shift > 0 && number > (std::numeric_limits<uint64_t>::max() >> shift)) return fail();
  return number << shift;
}

Result<NodeCheckSpec> parse_node_checks(std::string_view items) {
  NodeCheckSpec spec;
  if (items.empty()) {
    return Status::invalid_argument("builtin: names no check (gpu, nic, path=...)");
  }
  for (std::string_view item : split_items(items, ',')) {
    const size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    Status added;
    if (name == "gpu") {
      added = add_gpu(item, value, spec);
    } else if (name == "nic") {
      added = add_nic(item, value, spec, eq != std::string_view::npos);
    } else if (name == "path") {
      added = add_path(item, value, spec);
    } else {
      added = bad_item(item,
                       "unknown; the built-in checks are gpu, gpu=N, nic, nic=a+b, "
                       "path=/dir and path=/dir:min_free=SIZE");
    }
    if (!added) return added;
  }
  return spec;
}

Result<HealthCheckValue> split_health_check(const std::string& value) {
  HealthCheckValue split_value;
  std::string_view rest(value);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) {
    rest.remove_prefix(1);
  }
  if (rest.substr(0, kBuiltinPrefix.size()) != kBuiltinPrefix) {
    split_value.command = value;
    return split_value;
  }
  rest.remove_prefix(kBuiltinPrefix.size());
  size_t end = 0;
  while (end < rest.size() && !std::isspace(static_cast<unsigned char>(rest[end]))) ++end;
  split_value.builtin = std::string(rest.substr(0, end));
  if (auto spec = parse_node_checks(split_value.builtin); !spec) return spec.status();
  rest.remove_prefix(end);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) {
    rest.remove_prefix(1);
  }
  split_value.command = std::string(rest);
  return split_value;
}

}  // namespace ddprun::agent::builtin
