// The gradient reducer behind ddp::DistributedDataParallel. Internal: use the wrapper.
//
// Design (why it looks like this): LibTorch's c10d::Reducer cannot be used (Debian ships
// without the headers it needs), so this one is built from public autograd pieces:
// - parameters are grouped into buckets (bucket_layout.h), first in reverse registration
//   order, then, after the first synchronised pass, in the order their gradients actually
//   became ready on rank 0 (broadcast, so every rank builds the same buckets);
// - a post-hook on each parameter's AccumulateGrad node marks the parameter ready; when a
//   bucket is complete (and every earlier bucket was launched, so all ranks launch in the
//   same order) its flat buffer is filled (or already holds the gradients, with
//   gradient_as_bucket_view) and the communication hook starts the reduction;
// - the first hook of a backward pass queues a final callback on the autograd engine, which
//   runs before backward() returns: it launches what remains, waits, and leaves the averages
//   in param.grad();
// - join (reducer_join.cc): ranks whose data ran out mirror the others' collectives.
//
// Collectives, in the order every rank issues them (the join shadow relies on it):
//   forward:  [join announce] [buffer broadcast]
//   backward: bucket hooks' start() in bucket order, [used-anywhere all-reduce],
//             hooks' results in bucket order, [bucket-order broadcast, once]
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Tensor.h>

#include "ddp/ddp_options.h"
#include "ddp/process_group.h"
#include "detail/torch_compat.h"

namespace ddp::detail {

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  // params: (name, tensor) pairs in registration order; only those requiring grad are used.
  // buffers: tensors broadcast from rank 0 at construction and before training forwards.
  // Collective: broadcasts parameters and buffers from rank 0.
  static std::shared_ptr<Reducer> create(std::shared_ptr<ProcessGroup> group,
                                         std::vector<std::pair<std::string, at::Tensor>> params,
                                         std::vector<at::Tensor> buffers, DdpOptions options);
  ~Reducer();

  void before_forward(bool training);
  void set_sync(bool sync);
  bool sync() const;
  DdpStats stats() const;
  ProcessGroup& group() { return *group_; }
  void set_step_offset(std::int64_t steps);
  std::vector<std::vector<std::string>> bucket_parameter_names() const;

  // Join (reducer_join.cc).
  void begin_join();
  void finish_join();
  void abandon_join() noexcept;

  // From the AccumulateGrad post-hooks and the engine's final callback.
  void mark_ready(std::size_t index);
  void finalize();

 private:
  struct Param {
    std::string name;
    at::Tensor tensor;
    std::size_t bucket = 0;
    std::size_t slot = 0;  // position within the bucket
  };
  struct Bucket {
    std::vector<std::size_t> params;  // indices into params_, in buffer order
    std::vector<std::string> names;
    at::Tensor buffer;
    std::vector<at::Tensor> views;  // per parameter: its slice of buffer, with its shape
    std::size_t pending = 0;        // parameters of this pass not ready yet
    PendingBucket result;           // set once launched in this pass
  };

  Reducer(std::shared_ptr<ProcessGroup> group, DdpOptions options);
  void build_buckets(const std::vector<std::size_t>& order);
  void start_pass();
  void launch_ready_buckets();
  void launch(std::size_t b);
  GradBucket bucket_view(std::size_t b) const;
  bool detects_unused() const;
  at::Tensor used_anywhere_this_pass();
  void write_back(const std::vector<at::Tensor>& results, const at::Tensor& used_anywhere);
  void end_of_first_pass();
  void rebuild_buckets();
  void finish_pass();
  void broadcast_state(const std::vector<at::Tensor>& tensors, int root);
  void announce(bool active, bool will_broadcast, bool will_sync, std::vector<int>* flags);
  void shadow_backward();

  std::shared_ptr<ProcessGroup> group_;
  DdpOptions options_;
  std::vector<Param> params_;
  std::vector<Bucket> buckets_;
  std::vector<at::Tensor> buffers_;
  // AccumulateGrad nodes are held weakly by their variables; keeping them keeps our hooks.
  std::vector<compat::NodePtr> accumulators_;

  mutable std::mutex mutex_;  // guards everything below; hooks may run on autograd threads
  bool sync_ = true;
  // The last training forward ran with sync on (or none ran yet): the next one broadcasts
  // buffers. torch DDP's require_forward_param_sync.
  bool buffers_need_sync_ = true;
  // Per backward pass; reset by finish_pass().
  bool pass_started_ = false;
  std::vector<char> ready_;      // by param: its hook fired, or it was marked unused
  std::vector<char> fired_;      // by param: its hook fired in this pass
  std::size_t next_bucket_ = 0;  // buckets launch strictly in order, identically on all ranks
  // Until the buckets are rebuilt: the order in which gradients became ready.
  std::vector<std::size_t> ready_order_;
  bool first_pass_done_ = false;  // the first synchronised pass (or its shadow) completed
  // static_graph, known after the first pass: parameters without a gradient here, and the
  // used-anywhere flags of that pass.
  std::vector<char> statically_unused_;
  at::Tensor static_used_anywhere_;
  // join: active while a join() loop runs; buffers and the bucket order come from the
  // authoritative rank (the highest rank still training; 0 without join).
  bool join_active_ = false;
  int authoritative_rank_ = 0;
  std::int64_t step_offset_ = 0;
  DdpStats stats_;
  // When the last pass's synchronisation ended: the next pass's busy time starts there.
  std::optional<std::chrono::steady_clock::time_point> synced_at_;
};

}  // namespace ddp::detail
