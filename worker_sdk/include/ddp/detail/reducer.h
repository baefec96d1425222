// The gradient reducer behind ddp::DistributedDataParallel. Internal: use the wrapper.
//
// Design (why it looks like this): LibTorch's c10d::Reducer cannot be used (Debian ships
// without the headers it needs), so this one is built from public autograd pieces:
// - parameters are grouped into buckets in reverse registration order, because backward
//   produces gradients roughly in that order; the first bucket is small so communication
//   starts early;
// - a post-hook on each parameter's AccumulateGrad node marks the parameter ready; when a
//   bucket is complete (and every earlier bucket was launched, so all ranks launch in the
//   same order) its flat buffer is filled and the communication hook starts the all-reduce;
// - the first hook of a backward pass queues a final callback on the autograd engine, which
//   runs before backward() returns: it launches what remains, waits, and writes averaged
//   gradients back into param.grad().
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Tensor.h>

#include "ddp/comm_hooks.h"

namespace ddp {

class ProcessGroup;

struct DdpOptions {
  // Bucket size cap for all buckets but the first: a bucket closes once its parameters reach
  // it (the parameter crossing it included). PyTorch's default (25 MiB).
  std::size_t bucket_cap_bytes = 25u << 20;
  // Cap of the first bucket (the last parameters registered), so that communication starts
  // soon after backward begins. PyTorch's default (1 MiB).
  std::size_t first_bucket_cap_bytes = 1u << 20;
  // Broadcast buffers (e.g. BatchNorm running stats) from rank 0 before each training forward
  // that follows a synchronised one (as torch DDP does: the forwards after a no_sync() forward
  // skip it, so gradient accumulation pays one broadcast per synchronised step).
  bool broadcast_buffers = true;
  // Parameters that may get no gradient in some iterations on some ranks: they are treated
  // as zero at the end of backward, and a parameter unused on every rank keeps its gradient
  // untouched. Costs one extra small all-reduce per iteration and delays the buckets holding
  // such parameters until the end of backward.
  bool find_unused_parameters = false;
  // Names (as in named_parameters()) of parameters that are never used in training: they are
  // left out of the buckets entirely, at no cost.
  std::vector<std::string> unused_parameters;
  // How a bucket is averaged across ranks; nullptr means make_allreduce_hook().
  std::shared_ptr<CommHook> comm_hook;
};

// Counters for benchmarks and tests; read between iterations.
struct DdpStats {
  std::size_t bucket_count = 0;
  std::size_t synced_iterations = 0;
  // Time spent in the final callback waiting for communication that backward did not hide.
  std::chrono::nanoseconds comm_wait{0};
};

namespace detail {

struct ReducerState;

class Reducer {
 public:
  // params: (name, tensor) pairs in registration order; only those requiring grad are used.
  // buffers: tensors broadcast from rank 0 at construction and before training forwards.
  // Collective: broadcasts parameters and buffers from rank 0.
  Reducer(std::shared_ptr<ProcessGroup> group,
          std::vector<std::pair<std::string, at::Tensor>> params, std::vector<at::Tensor> buffers,
          DdpOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Called by the wrapper before every forward; `training`: module is in train mode.
  void before_forward(bool training);
  void set_sync(bool sync);
  bool sync() const;
  DdpStats stats() const;
  ProcessGroup& group();

 private:
  std::shared_ptr<ReducerState> state_;
};

}  // namespace detail
}  // namespace ddp
