// torchrun's --numa-binding: each worker runs on the CPUs near the device it uses.
//
// The topology comes from sysfs (NUMA nodes and their CPUs, sockets, physical cores, L3
// caches, and NVIDIA GPUs with the NUMA node of their PCI slot); the plan is a pure function
// of it, so it is tested on fabricated trees. Local rank r uses GPU r (in PCI bus order, i.e.
// CUDA_DEVICE_ORDER=PCI_BUS_ID; torchrun asks CUDA, which ddprun does not load). On a machine
// without GPUs, workers are spread over the NUMA nodes in contiguous blocks of local ranks, so
// that CPU training gets the same locality.
//
// Modes (torchrun's): node — every CPU of the device's NUMA node; socket — every CPU of the
// node's socket; exclusive — the node's physical cores divided evenly among the workers that
// use that node (the lowest ranks get one more when it does not divide), with every hardware
// thread of each core; core-complex — one L3 cache domain of the node per worker, a different
// one for each worker while they last. Only CPUs the agent itself may use count.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"

namespace ddprun::agent {

enum class NumaMode { kNode, kSocket, kExclusive, kCoreComplex };

// "node", "socket", "exclusive", "core-complex"; an error naming the choices otherwise.
Result<NumaMode> parse_numa_mode(const std::string& text);
const char* to_string(NumaMode mode);

// What the plan needs to know about the machine.
struct CpuTopology {
  std::map<int, std::set<int>> node_cpus;  // NUMA node → its CPUs the agent may use
  std::map<int, int> cpu_socket;           // CPU → physical package
  std::map<int, int> cpu_core;             // CPU → lowest CPU of its physical core
  std::map<int, int> cpu_l3;               // CPU → lowest CPU sharing its L3 cache
  std::vector<int> gpu_nodes;              // NUMA node of each NVIDIA GPU, in PCI bus order
};

// Reads the topology under `sysfs_root` ("/sys"), keeping only the CPUs in `allowed` (the
// agent's own affinity; empty: all). Errors name the file that could not be read.
Result<CpuTopology> read_cpu_topology(const std::string& sysfs_root, const std::set<int>& allowed);

// The CPUs of every local rank (index = local rank) under `mode`. Errors: no NUMA node with
// CPUs, fewer GPUs than workers, fewer physical cores than workers on a node (exclusive).
Result<std::vector<std::set<int>>> plan_numa_binding(NumaMode mode, int nproc,
                                                     const CpuTopology& topology);

// "0-3,8,10-11" (the kernel's cpulist format) both ways.
Result<std::set<int>> parse_cpu_list(const std::string& text);
std::string format_cpu_list(const std::set<int>& cpus);

}  // namespace ddprun::agent
