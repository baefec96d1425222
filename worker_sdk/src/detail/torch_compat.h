// Every difference between LibTorch 1.13 (Debian, CPU, Gloo) and PyTorch 2.x (CUDA, NCCL)
// that the SDK touches lives in this one file, selected by TORCH_VERSION_MAJOR.
//
// - Process-group dispatch: in 1.13 ProcessGroupGloo/NCCL derive from c10d::ProcessGroup; in
//   2.x they derive from c10d::Backend and c10d::ProcessGroup merely routes to them. The SDK
//   holds the concrete backend and calls it directly, through `BackendBase`.
// - TCPStoreOptions gained fields in 2.x (useLibUV, masterListenFd): we set members by name,
//   never by aggregate initialisation.
// - ProcessGroupGloo::createDeviceForHostname gained a defaulted `lazyInit` in 2.x.
// - Work lives in c10d::Work in both (1.13 still aliases ProcessGroup::Work to it).
// - c10::Error::backtrace() is a string in 1.13 and a lazily symbolised c10::Backtrace in
//   recent 2.x; autograd Nodes are held by std::shared_ptr in 1.13 and by c10::intrusive_ptr in
//   recent 2.x. Both are decided by the types the headers declare (error_backtrace, NodePtr).
// - c10d's NCCL headers include <nccl.h> (worker_sdk/CMakeLists.txt finds it beside the wheel).
// - ATen's batch-norm statistics ops (batch_norm_stats, batch_norm_gather_stats_with_counts,
//   batch_norm_elemt, batch_norm_backward_reduce/elemt), which SyncBatchNorm is built on,
//   have only CUDA kernels in 1.13. Whether 2.x has CPU ones was not verified here, so the
//   SDK uses them for CUDA tensors only and computes the same quantities with ordinary ops
//   on CPU (batch_norm_stats.cc): aten_batch_norm_stats_on() decides.
//
// Include from .cc files and internal headers only, never from include/ddp: it pulls in c10d
// headers, which are slow to compile.
#pragma once

#include <torch/version.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <c10/util/Exception.h>
#include <torch/csrc/autograd/variable.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif
#if defined(DDP_WITH_NCCL)
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace ddp::detail::compat {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = ::c10d::Backend;
#else
using BackendBase = ::c10d::ProcessGroup;
#endif
using WorkPtr = c10::intrusive_ptr<::c10d::Work>;
using StorePtr = c10::intrusive_ptr<::c10d::Store>;
// A strong reference to an autograd Node (a parameter's AccumulateGrad), whichever smart
// pointer this LibTorch uses for them.
using NodePtr =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));

inline StorePtr make_tcp_store(const std::string& host, std::uint16_t port, bool is_server,
                               int world_size, std::chrono::milliseconds timeout) {
  ::c10d::TCPStoreOptions opts;
  opts.port = port;
  opts.isServer = is_server;
  opts.numWorkers = static_cast<std::size_t>(world_size);
  // The process group's own rendezvous synchronises the ranks; a server that blocked here
  // until every client connected would only duplicate that wait.
  opts.waitWorkers = false;
  opts.timeout = timeout;
  return c10::make_intrusive<::c10d::TCPStore>(host, opts);
}

inline bool aten_batch_norm_stats_on(const at::Tensor& t) { return t.is_cuda(); }

// Where a c10::Error was raised. backtrace() returns the text in 1.13 and a c10::Backtrace (a
// lazily symbolised string behind a shared_ptr) in recent 2.x (2.11, 2.15): decided by the
// type, not by a version number (a template, so that only the matching branch is compiled).
template <typename Trace>
std::string backtrace_text(const Trace& trace) {
  if constexpr (std::is_convertible_v<const Trace&, std::string>) {
    return trace;
  } else {
    return trace ? trace->get() : std::string();
  }
}
inline std::string error_backtrace(const c10::Error& e) { return backtrace_text(e.backtrace()); }

inline StorePtr make_hash_store() { return c10::make_intrusive<::c10d::HashStore>(); }

inline StorePtr make_prefix_store(const std::string& prefix, StorePtr inner) {
  return c10::make_intrusive<::c10d::PrefixStore>(prefix, std::move(inner));
}

// hostname: the address Gloo binds and advertises; empty picks the interface named by
// GLOO_SOCKET_IFNAME when set (interface non-empty), else the host's default address.
inline c10::intrusive_ptr<BackendBase> make_gloo(const StorePtr& store, int rank, int size,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string& hostname,
                                                 const std::string& interface) {
  auto options = ::c10d::ProcessGroupGloo::Options::create(timeout);
  if (!interface.empty()) {
    options->devices.push_back(::c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  } else if (!hostname.empty()) {
    options->devices.push_back(::c10d::ProcessGroupGloo::createDeviceForHostname(hostname));
  } else {
    options->devices.push_back(::c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return c10::make_intrusive<::c10d::ProcessGroupGloo>(store, rank, size, options);
}

// NCCL needs each rank on its own device: LOCAL_RANK picks it (modulo the devices visible, so
// CUDA_VISIBLE_DEVICES restrictions work). A no-op without NCCL.
inline void select_cuda_device(int local_rank) {
#if defined(DDP_WITH_NCCL)
  const auto count = static_cast<int>(c10::cuda::device_count());
  if (count > 0) c10::cuda::set_device(static_cast<c10::DeviceIndex>(local_rank % count));
#else
  (void)local_rank;
#endif
}

// The device of LOCAL_RANK for an NCCL group (the CPU in a build without NCCL).
inline at::Device nccl_device(int local_rank) {
#if defined(DDP_WITH_NCCL)
  const auto count = static_cast<int>(c10::cuda::device_count());
  if (count > 0) return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
#else
  (void)local_rank;
#endif
  return at::Device(at::kCPU);
}

#if defined(DDP_WITH_NCCL)
inline c10::intrusive_ptr<BackendBase> make_nccl(const StorePtr& store, int rank, int size,
                                                 std::chrono::milliseconds timeout) {
  auto options = ::c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<::c10d::ProcessGroupNCCL>(store, rank, size, options);
}
#endif

}  // namespace ddp::detail::compat
