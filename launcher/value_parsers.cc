#include "launcher/value_parsers.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "agent/process/exit_status.h"
#include "agent/process/worker_env.h"

namespace ddprun::launcher {
namespace {

std::optional<int> to_int(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, sep)) parts.push_back(part);
  return parts;
}

int online_cpus() {
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace

Result<NodeRange> parse_nnodes(const std::string& text) {
  const auto parts = split(text, ':');
  NodeRange range;
  auto min = parts.empty() ? std::nullopt : to_int(parts[0]);
  auto max = parts.size() == 2 ? to_int(parts[1]) : min;
  if (parts.empty() || parts.size() > 2 || !min || !max || *min <= 0 || *max < *min) {
    return Status::invalid_argument("--nnodes=" + text +
                                    " is invalid: expected N or MIN:MAX with 0 < MIN <= MAX");
  }
  range.min = *min;
  range.max = *max;
  return range;
}

namespace {

using agent::devices::Accelerators;
using agent::devices::Vendor;

// The first of `found` of a vendor in `vendors` with a visible device; else the first of them
// installed (to say what hid it); else nullptr.
const Accelerators* pick(const std::vector<Accelerators>& found,
                         std::initializer_list<Vendor> vendors) {
  const Accelerators* installed = nullptr;
  for (const Accelerators& kind : found) {
    if (std::find(vendors.begin(), vendors.end(), kind.vendor) == vendors.end()) continue;
    if (kind.visible > 0) return &kind;
    if (!installed) installed = &kind;
  }
  return installed;
}

Status none_visible(const std::string& text, const Accelerators* hidden, const char* wanted,
                    const char* where) {
  if (hidden) {
    return Status::invalid_argument(fmt::format(
        "--nproc_per_node={}: this node has {} {} GPU(s), but {} hides them all; give the number "
        "of workers, or change that variable",
        text, hidden->installed, agent::devices::vendor_name(hidden->vendor), hidden->narrowed_by));
  }
  return Status::invalid_argument(
      fmt::format("--nproc_per_node={}: this node has no {} GPU (none under {}); give the number "
                  "of workers, or cpu",
                  text, wanted, where));
}

}  // namespace

Result<NprocPerNode> resolve_nproc_per_node(const std::string& text,
                                            const std::vector<Accelerators>& found, int cpus) {
  const Accelerators* any = pick(found, {Vendor::kNvidia, Vendor::kAmd, Vendor::kIntel});
  NprocPerNode nproc;
  if (any && any->visible > 0) nproc.accelerator = any->vendor;
  if (text == "gpu" || text == "xpu") {
    const bool gpu = text == "gpu";
    const Accelerators* kind =
        gpu ? pick(found, {Vendor::kNvidia, Vendor::kAmd}) : pick(found, {Vendor::kIntel});
    if (!kind || kind->visible == 0) {
      Status none = none_visible(text, kind, gpu ? "NVIDIA or AMD" : "Intel",
                                 gpu ? "/proc/driver/nvidia/gpus, /sys/class/kfd or /sys/class/drm"
                                     : "/sys/class/drm with the i915 or xe driver");
      // torch counts Intel GPUs as xpu and NVIDIA or AMD ones as gpu: say which applies.
      const Accelerators* other =
          gpu ? pick(found, {Vendor::kIntel}) : pick(found, {Vendor::kNvidia, Vendor::kAmd});
      if (!kind && other && other->visible > 0) {
        return Status::invalid_argument(fmt::format(
            "{} ({} {} GPU(s) are there: --nproc_per_node={})", none.message(), other->visible,
            agent::devices::vendor_name(other->vendor), gpu ? "xpu" : "gpu"));
      }
      return none;
    }
    nproc.count = kind->visible;
    nproc.accelerator = kind->vendor;
    return nproc;
  }
  if (text == "auto") {
    nproc.count = nproc.accelerator ? any->visible : cpus;
    return nproc;
  }
  if (text == "cpu") {
    nproc.count = cpus;
    return nproc;
  }
  auto n = to_int(text);
  if (!n || *n <= 0) {
    return Status::invalid_argument(
        "--nproc_per_node=" + text +
        " is invalid: expected a positive integer, cpu, gpu, xpu or auto (for the devices of a "
        "torch extension's backend, give the number of workers)");
  }
  nproc.count = *n;
  return nproc;
}

std::filesystem::path device_root() {
  const char* root = std::getenv("DDPRUN_DEVICE_ROOT");
  return root && *root ? std::filesystem::path(root) : std::filesystem::path("/");
}

Result<NprocPerNode> resolve_nproc_per_node(const std::string& text) {
  // Read for a number of workers too: the accelerator is what --virtual-local-rank narrows.
  const auto found =
      agent::devices::detect_accelerators(device_root(), agent::current_environment());
  return resolve_nproc_per_node(text, found, online_cpus());
}

Result<int> parse_nproc_per_node(const std::string& text) {
  auto nproc = resolve_nproc_per_node(text);
  if (!nproc) return nproc.status();
  return nproc->count;
}

Result<agent::PerRankStreams> parse_std_streams(const std::string& flag, const std::string& text) {
  auto bad = [&] {
    return Status::invalid_argument(
        flag + "=" + text +
        " is invalid: expected 0-3 (0 none, 1 stdout, 2 stderr, 3 both) or a "
        "per-rank map such as 0:1,1:2");
  };
  agent::PerRankStreams streams;
  if (text.find(':') == std::string::npos) {
    auto v = to_int(text);
    if (!v || *v < 0 || *v > 3) return bad();
    streams.all = *v;
    return streams;
  }
  for (const auto& item : split(text, ',')) {
    const auto kv = split(item, ':');
    auto rank = kv.size() == 2 ? to_int(kv[0]) : std::nullopt;
    auto value = kv.size() == 2 ? to_int(kv[1]) : std::nullopt;
    if (!rank || !value || *rank < 0 || *value < 0 || *value > 3) return bad();
    streams.per_rank[*rank] = *value;
  }
  return streams;
}

Result<std::vector<int>> parse_rank_list(const std::string& flag, const std::string& text) {
  std::vector<int> ranks;
  if (text.empty()) return ranks;
  for (const auto& item : split(text, ',')) {
    auto rank = to_int(item);
    if (!rank || *rank < 0) {
      return Status::invalid_argument(
          fmt::format("{}={} is invalid: expected local ranks such as 0,1,2", flag, text));
    }
    ranks.push_back(*rank);
  }
  return ranks;
}

Result<std::vector<int>> parse_signal_list(const std::string& text, const std::string& flag) {
  std::vector<int> signals;
  for (const auto& name : split(text, ',')) {
    int signo = agent::signal_from_name(name);
    if (signo == 0 || signo == SIGKILL || signo == SIGSTOP || signo == SIGCHLD) {
      return Status::invalid_argument(
          fmt::format("{}: '{}' is not a signal ddprun can handle", flag, name));
    }
    signals.push_back(signo);
  }
  return signals;
}

Result<std::vector<std::string>> parse_module_list(const std::string& text) {
  std::vector<std::string> modules;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string name = text.substr(start, comma - start);
    bool valid = !name.empty() && name.front() != '.' && name.back() != '.' &&
                 name.find("..") == std::string::npos;
    for (size_t i = 0; valid && i < name.size(); ++i) {
      const char c = name[i];
      const bool starts_part = i == 0 || name[i - 1] == '.';
      valid = c == '.' || c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
              (!starts_part && std::isdigit(static_cast<unsigned char>(c)));
    }
    if (!valid) {
      return Status::invalid_argument("--preload: '" + name +
                                      "' is not a Python module name (give modules like "
                                      "torch,numpy)");
    }
    modules.push_back(std::move(name));
    start = comma + 1;
  }
  return modules;
}

}  // namespace ddprun::launcher
