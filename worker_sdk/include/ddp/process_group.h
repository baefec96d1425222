// Process groups: initialisation from the launcher's environment, collectives and
// point-to-point on tensors.
//
// Contract
// - Collectives are collective: every member calls them in the same order with matching
//   shapes and dtypes. Tensors must be dense and contiguous; results are written in place.
// - Blocking calls return when the local part is complete; they throw ddp::Error (rank and
//   operation named) on failure or when InitOptions::timeout passes without the peers joining.
// - Thread-safety: one ProcessGroup may be used from one thread at a time, except that the
//   DDP reducer launches all_reduce_async from autograd threads while the training thread is
//   inside backward() (the c10d backend serialises its work queue).
// - Ownership: a ProcessGroup owns its store connection and backend; sub-groups share the
//   store. Destroying the group that hosts the TCPStore (rank 0 under ddprun) ends the store:
//   call barrier() before a normal exit so no rank is still talking to it.
#pragma once

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "ddp/launch_env.h"

namespace ddp {

enum class Backend {
  kAuto,  // NCCL when the SDK was built with it and CUDA is available, Gloo otherwise
  kGloo,  // CPU tensors (and CUDA tensors via host copies)
  kNccl,  // CUDA tensors; throws at init when the SDK was built without NCCL
};

enum class ReduceOp { kSum, kAvg, kMin, kMax, kProduct };

struct InitOptions {
  Backend backend = Backend::kAuto;
  // How long a collective may wait for its peers before it throws. PyTorch's default.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  // How long connecting to (or hosting) the TCPStore may take.
  std::chrono::milliseconds store_timeout = std::chrono::minutes(5);
  // Outside a launcher (no RANK/WORLD_SIZE): run as a world of size 1 instead of throwing.
  bool allow_single_process = false;
  // Keys of this job in the store are "<key_prefix>/attempt_<restart_count>/...", so a
  // restarted worker group never reads a previous attempt's keys from an agent-hosted store.
  std::string key_prefix = "ddp";
};

namespace detail {
struct GroupState;
struct PendingWork;
}  // namespace detail

// A handle to an operation in flight (isend, irecv, all_reduce_async). Cheap to copy.
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::PendingWork> work) : work_(std::move(work)) {}
  // Blocks until the operation completes (bounded by InitOptions::timeout); throws ddp::Error.
  void wait();
  // Non-blocking.
  bool is_completed() const;

 private:
  std::shared_ptr<detail::PendingWork> work_;
};

class ProcessGroup {
 public:
  explicit ProcessGroup(std::shared_ptr<detail::GroupState> state);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // This process's rank within the group, and the group's size.
  int rank() const;
  int size() const;
  // This process's rank in the whole job (equals rank() for the default group).
  int global_rank() const;
  // True on the group's rank 0: the rank that logs, writes files and hosts the store.
  bool is_primary() const { return rank() == 0; }
  Backend backend() const;
  const LaunchEnv& launch_env() const;

  // Prints its arguments and a newline on the primary rank only; no-op elsewhere.
  template <class... Args>
  void print_primary(const Args&... args) const {
    if (!is_primary()) return;
    std::ostringstream line;
    (line << ... << args);
    line << '\n';
    std::cout << line.str() << std::flush;
  }

  // ---- Collectives (blocking) ----
  void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
  void broadcast(at::Tensor& tensor, int root = 0);
  // The result is valid on root only; other ranks' tensors are left unspecified.
  void reduce(at::Tensor& tensor, int root = 0, ReduceOp op = ReduceOp::kSum);
  // Every rank's tensor, in rank order. Sizes along dim 0 may differ between ranks; other
  // dimensions and the dtype must match.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor);
  // Like all_gather, but only root receives the list; other ranks get an empty vector.
  std::vector<at::Tensor> gather(const at::Tensor& tensor, int root = 0);
  void barrier();

  // ---- Asynchronous sum all-reduce (used by the DDP reducer) ----
  // Starts summing `tensor` in place; the caller keeps `tensor` alive until wait() returns.
  Request all_reduce_async(at::Tensor& tensor);

  // ---- Point-to-point ----
  void send(const at::Tensor& tensor, int dst, int tag = 0);
  void recv(at::Tensor& tensor, int src, int tag = 0);
  // The caller keeps the tensor alive and untouched until the request completes.
  Request isend(const at::Tensor& tensor, int dst, int tag = 0);
  Request irecv(at::Tensor& tensor, int src, int tag = 0);

  // ---- Sub-groups ----
  // Collective over this group: every member calls it with the same sorted, distinct ranks
  // (ranks of this group). Members get the new group; the others get nullptr.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks);

  // For the SDK's own modules (reducer, snapshots); not a stable API.
  detail::GroupState& state() { return *state_; }

 private:
  std::shared_ptr<detail::GroupState> state_;
};

// Creates the job's default group from the launcher's environment: connects to (or, on rank
// 0 when TORCHELASTIC_USE_AGENT_STORE is not True, hosts) the TCPStore at
// MASTER_ADDR:MASTER_PORT, and builds the backend. Blocks until every rank has joined or
// options.timeout passes. Throws ddp::Error("init_process_group").
std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options = {});
// The same with an explicit environment (tests, embedding).
std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options, const LaunchEnv& env);

// Whether this build of the SDK has the NCCL backend.
bool nccl_available();

}  // namespace ddp
