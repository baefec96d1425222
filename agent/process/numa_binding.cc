#include "agent/process/numa_binding.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace ddprun::agent {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

// A decimal ("-1") or hexadecimal ("0x10de") integer file.
std::optional<int> read_int(const fs::path& file) {
  auto line = read_line(file);
  if (!line) return std::nullopt;
  std::string_view v = *line;
  int base = 10;
  if (v.rfind("0x", 0) == 0) {
    v.remove_prefix(2);
    base = 16;
  }
  int value = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), value, base);
  if (ec != std::errc() || ptr != v.data() + v.size()) return std::nullopt;
  return value;
}

// The lowest CPU of a cpulist file (a core's or a cache's siblings), or `cpu` itself.
int lowest_of(const fs::path& file, int cpu) {
  auto line = read_line(file);
  if (!line) return cpu;
  auto cpus = parse_cpu_list(*line);
  return cpus && !cpus->empty() ? *cpus->begin() : cpu;
}

// The L3 (or, lacking one, the last-level) cache shared-CPU list of a CPU.
int l3_group(const fs::path& cpu_dir, int cpu) {
  std::error_code ec;
  int best_level = -1;
  int group = cpu;
  for (const auto& index : fs::directory_iterator(cpu_dir / "cache", ec)) {
    const auto level = read_int(index.path() / "level");
    if (!level || *level > 3 || *level <= best_level) continue;
    best_level = *level;
    group = lowest_of(index.path() / "shared_cpu_list", cpu);
  }
  return group;
}

std::vector<int> nvidia_gpu_nodes(const fs::path& pci) {
  std::vector<std::pair<std::string, int>> gpus;  // PCI address → NUMA node
  std::error_code ec;
  for (const auto& dev : fs::directory_iterator(pci, ec)) {
    const auto vendor = read_int(dev.path() / "vendor");
    const auto cls = read_int(dev.path() / "class");
    // 0x0300xx VGA and 0x0302xx 3D controllers of vendor NVIDIA.
    if (vendor != 0x10de || !cls || ((*cls >> 8) != 0x0300 && (*cls >> 8) != 0x0302)) continue;
    gpus.emplace_back(dev.path().filename().string(),
                      std::max(0, read_int(dev.path() / "numa_node").value_or(0)));
  }
  std::sort(gpus.begin(), gpus.end());
  std::vector<int> nodes;
  nodes.reserve(gpus.size());
  for (const auto& [address, node] : gpus) nodes.push_back(node);
  return nodes;
}

// Which NUMA node each local rank's device is on.
Result<std::vector<int>> device_nodes(int nproc, const CpuTopology& t) {
  std::vector<int> nodes;
  if (!t.gpu_nodes.empty()) {
    if (static_cast<int>(t.gpu_nodes.size()) < nproc) {
      return Status::invalid_argument(
          fmt::format("--numa-binding: {} workers but {} GPUs; local rank r uses GPU r", nproc,
                      t.gpu_nodes.size()));
    }
    nodes.assign(t.gpu_nodes.begin(), t.gpu_nodes.begin() + nproc);
    for (int node : nodes) {
      if (!t.node_cpus.count(node)) {
        return Status::invalid_argument(fmt::format(
            "--numa-binding: a GPU sits on NUMA node {}, which has no CPU this agent may use",
            node));
      }
    }
    return nodes;
  }
  std::vector<int> with_cpus;
  for (const auto& [node, cpus] : t.node_cpus) {
    if (!cpus.empty()) with_cpus.push_back(node);
  }
  if (with_cpus.empty()) return Status::invalid_argument("--numa-binding: no NUMA node has CPUs");
  const auto count = static_cast<long>(with_cpus.size());
  for (int r = 0; r < nproc; ++r) nodes.push_back(with_cpus[r * count / nproc]);
  return nodes;
}

std::set<int> socket_cpus(int node, const CpuTopology& t) {
  const std::set<int>& own = t.node_cpus.at(node);
  const int socket = t.cpu_socket.count(*own.begin()) ? t.cpu_socket.at(*own.begin()) : 0;
  std::set<int> out;
  for (const auto& [n, cpus] : t.node_cpus) {
    for (int cpu : cpus) {
      const auto it = t.cpu_socket.find(cpu);
      if ((it == t.cpu_socket.end() ? 0 : it->second) == socket) out.insert(cpu);
    }
  }
  return out;
}

// The node's CPUs grouped by `key` (core or L3 group), groups in order of their lowest CPU.
std::vector<std::set<int>> groups_of(const std::set<int>& cpus, const std::map<int, int>& key) {
  std::map<int, std::set<int>> by_key;
  for (int cpu : cpus) {
    const auto it = key.find(cpu);
    by_key[it == key.end() ? cpu : it->second].insert(cpu);
  }
  std::vector<std::set<int>> out;
  out.reserve(by_key.size());
  for (auto& [k, group] : by_key) out.push_back(std::move(group));
  return out;
}

}  // namespace

Result<NumaMode> parse_numa_mode(const std::string& text) {
  if (text == "node") return NumaMode::kNode;
  if (text == "socket") return NumaMode::kSocket;
  if (text == "exclusive") return NumaMode::kExclusive;
  if (text == "core-complex") return NumaMode::kCoreComplex;
  return Status::invalid_argument("--numa-binding=" + text +
                                  ": use node, socket, exclusive or core-complex");
}

const char* to_string(NumaMode mode) {
  switch (mode) {
    case NumaMode::kNode:
      return "node";
    case NumaMode::kSocket:
      return "socket";
    case NumaMode::kExclusive:
      return "exclusive";
    case NumaMode::kCoreComplex:
      return "core-complex";
  }
  return "?";
}

Result<std::set<int>> parse_cpu_list(const std::string& text) {
  std::set<int> cpus;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    const std::size_t dash = item.find('-');
    int lo = 0, hi = 0;
    const char* b = item.data();
    const char* e = item.data() + item.size();
    if (dash == std::string::npos) {
      const auto [ptr, ec] = std::from_chars(b, e, lo);
      if (ec != std::errc() || ptr != e || lo < 0) {
        return Status::malformed("'" + text + "' is not a CPU list");
      }
      hi = lo;
    } else if (std::from_chars(b, b + dash, lo).ec != std::errc() ||
               std::from_chars(b + dash + 1, e, hi).ec != std::errc() || hi < lo ||
               hi - lo > 65536) {
      return Status::malformed("'" + text + "' is not a CPU list");
    }
    for (int cpu = lo; cpu <= hi; ++cpu) cpus.insert(cpu);
  }
  return cpus;
}

std::string format_cpu_list(const std::set<int>& cpus) {
  std::string out;
  for (auto it = cpus.begin(); it != cpus.end();) {
    int lo = *it, hi = lo;
    while (++it != cpus.end() && *it == hi + 1) ++hi;
    if (!out.empty()) out += ',';
    out += lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi);
  }
  return out;
}

Result<CpuTopology> read_cpu_topology(const std::string& sysfs_root, const std::set<int>& allowed) {
  const fs::path root(sysfs_root);
  CpuTopology t;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root / "devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4) continue;
    int node = 0;
    if (std::from_chars(name.data() + 4, name.data() + name.size(), node).ec != std::errc()) {
      continue;
    }
    auto list = read_line(entry.path() / "cpulist");
    if (!list) return Status::not_found("cannot read " + (entry.path() / "cpulist").string());
    auto cpus = parse_cpu_list(*list);
    if (!cpus) return cpus.status();
    std::set<int>& mine = t.node_cpus[node];
    for (int cpu : *cpus) {
      if (allowed.empty() || allowed.count(cpu)) mine.insert(cpu);
    }
  }
  if (t.node_cpus.empty()) {  // a kernel without NUMA: one node with every allowed CPU
    auto online = read_line(root / "devices/system/cpu/online");
    if (!online) return Status::not_found("cannot read the CPU topology under " + sysfs_root);
    auto cpus = parse_cpu_list(*online);
    if (!cpus) return cpus.status();
    for (int cpu : *cpus) {
      if (allowed.empty() || allowed.count(cpu)) t.node_cpus[0].insert(cpu);
    }
  }
  for (const auto& [node, cpus] : t.node_cpus) {
    for (int cpu : cpus) {
      const fs::path dir = root / fmt::format("devices/system/cpu/cpu{}", cpu);
      t.cpu_socket[cpu] = read_int(dir / "topology/physical_package_id").value_or(0);
      t.cpu_core[cpu] = lowest_of(dir / "topology/thread_siblings_list", cpu);
      t.cpu_l3[cpu] = l3_group(dir, cpu);
    }
  }
  t.gpu_nodes = nvidia_gpu_nodes(root / "bus/pci/devices");
  return t;
}

Result<std::vector<std::set<int>>> plan_numa_binding(NumaMode mode, int nproc,
                                                     const CpuTopology& t) {
  auto nodes = device_nodes(nproc, t);
  if (!nodes) return nodes.status();
  std::vector<std::set<int>> plan(nproc);
  std::map<int, int> seen_on_node;  // how many earlier ranks use each node
  std::map<int, int> ranks_on_node;
  for (int node : *nodes) ++ranks_on_node[node];
  for (int r = 0; r < nproc; ++r) {
    const int node = (*nodes)[r];
    const int index = seen_on_node[node]++;
    const std::set<int>& cpus = t.node_cpus.at(node);
    switch (mode) {
      case NumaMode::kNode:
        plan[r] = cpus;
        break;
      case NumaMode::kSocket:
        plan[r] = socket_cpus(node, t);
        break;
      case NumaMode::kExclusive: {
        const auto cores = groups_of(cpus, t.cpu_core);
        const int sharing = ranks_on_node[node];
        const int per = static_cast<int>(cores.size()) / sharing;
        const int extra = static_cast<int>(cores.size()) % sharing;
        if (per < 1) {
          return Status::invalid_argument(fmt::format(
              "--numa-binding exclusive: NUMA node {} has {} physical cores for {} workers", node,
              cores.size(), sharing));
        }
        const int begin = index * per + std::min(index, extra);
        const int end = begin + per + (index < extra ? 1 : 0);
        for (int c = begin; c < end; ++c) plan[r].insert(cores[c].begin(), cores[c].end());
        break;
      }
      case NumaMode::kCoreComplex: {
        const auto complexes = groups_of(cpus, t.cpu_l3);
        plan[r] = complexes[index % complexes.size()];
        break;
      }
    }
  }
  return plan;
}

}  // namespace ddprun::agent
