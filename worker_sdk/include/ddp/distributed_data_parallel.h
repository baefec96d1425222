// ddp::DistributedDataParallel: data-parallel training of a torch::nn module, with the same
// user code as single-process training.
//
//   auto group = ddp::init_process_group();
//   Net net;                                       // a TORCH_MODULE holder
//   ddp::DistributedDataParallel model(net, group);
//   auto loss = loss_fn(model(x), y);
//   loss.backward();                               // gradients are averaged across ranks here
//   optimizer.step();
//
// Contract
// - Construction is collective and blocking: parameters and buffers are broadcast from rank 0.
// - backward() returns with every parameter's gradient averaged over the group (unless inside
//   no_sync()). Every rank must run the same number of synchronised backward passes, unless
//   the loop runs inside join() (uneven inputs).
// - Gradients are reduced by bucket as they become ready, overlapping the rest of backward.
//   After the first synchronised iteration the buckets are rebuilt in the order in which the
//   gradients actually became ready (rank 0's order), as PyTorch does.
// - Errors (a peer gone, a timeout, a parameter without gradient) surface from backward() as
//   ddp::Error. Not thread-safe: one training thread per wrapper.
// - After each synchronised backward pass it calls ddp::heartbeat(step), step = synchronised
//   passes so far + set_step_offset() (see ddp/heartbeat.h).
// - The wrapper shares the module (ModuleHolder semantics).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "ddp/ddp_options.h"
#include "ddp/export.h"
#include "ddp/process_group.h"

namespace ddp {

namespace detail {
class Reducer;  // worker_sdk/src/reducer.h
}

class DistributedDataParallelBase;

// Restores synchronisation when it goes out of scope; see DistributedDataParallel::no_sync().
class DDP_API NoSyncGuard {
 public:
  explicit NoSyncGuard(DistributedDataParallelBase& ddp);
  ~NoSyncGuard();
  NoSyncGuard(NoSyncGuard&& other) noexcept
      : ddp_(std::exchange(other.ddp_, nullptr)), previous_(other.previous_) {}
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(NoSyncGuard&&) = delete;

 private:
  DistributedDataParallelBase* ddp_;
  bool previous_;
};

// The part of the wrapper that does not depend on the module type.
class DDP_API DistributedDataParallelBase {
 public:
  DistributedDataParallelBase(const DistributedDataParallelBase&) = delete;
  DistributedDataParallelBase& operator=(const DistributedDataParallelBase&) = delete;

  // Gradients of backward passes run while the guard lives accumulate locally; the next
  // synchronised backward averages the accumulated sum (gradient accumulation).
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // Uneven inputs (PyTorch's model.join()): runs `loop`, this rank's training loop, and
  // then, while other ranks still train, shadows their synchronised iterations (their
  // buffer broadcasts and gradient all-reduces, with zero gradients from this rank), until
  // every rank's loop has ended. Gradients stay averaged over the whole group's size (ranks
  // that ran out contribute zeros), and buffers come from the highest rank still training.
  // Collective: every rank calls join() around its loop; only this wrapper's collectives may
  // run inside the loop (a collective of the program's own would wait for ranks that
  // finished). If `loop` throws, join rethrows without shadowing.
  template <class Loop>
  void join(Loop&& loop) {
    begin_join();
    try {
      loop();
    } catch (...) {
      abandon_join();
      throw;
    }
    finish_join();
  }

  // Adds `steps` to the heartbeat's step (e.g. the global step of a snapshot resumed from).
  void set_step_offset(std::int64_t steps);
  ProcessGroup& group();
  DdpStats stats() const;
  // Parameter names per bucket, in reduction order (changes once, when buckets are rebuilt).
  std::vector<std::vector<std::string>> bucket_parameter_names() const;

 protected:
  DistributedDataParallelBase(std::shared_ptr<ProcessGroup> group,
                              std::vector<std::pair<std::string, at::Tensor>> params,
                              std::vector<at::Tensor> buffers, DdpOptions options);
  ~DistributedDataParallelBase();
  // Called before every forward; `training`: the module is in train mode.
  void before_forward(bool training);

 private:
  friend class NoSyncGuard;
  bool sync() const;
  void set_sync(bool sync);
  void begin_join();
  void finish_join();
  void abandon_join() noexcept;

  std::shared_ptr<detail::Reducer> reducer_;  // shared: autograd hooks hold it weakly
};

// ModuleHolder: a TORCH_MODULE holder (e.g. torch::nn::Linear, or your own Net).
template <class ModuleHolder>
class DistributedDataParallel : public DistributedDataParallelBase {
 public:
  DistributedDataParallel(ModuleHolder module, std::shared_ptr<ProcessGroup> group,
                          DdpOptions options = {})
      : DistributedDataParallelBase(std::move(group), named_params(*module), module->buffers(),
                                    std::move(options)),
        module_(std::move(module)) {}

  // Runs the module's forward (after broadcasting buffers when training).
  template <class... Args>
  decltype(auto) forward(Args&&... args) {
    before_forward(module_->is_training());
    return module_->forward(std::forward<Args>(args)...);
  }
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    return forward(std::forward<Args>(args)...);
  }

  // The wrapped module: for parameters(), train()/eval(), save().
  ModuleHolder& module() { return module_; }

 private:
  static std::vector<std::pair<std::string, at::Tensor>> named_params(torch::nn::Module& m) {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& item : m.named_parameters(/*recurse=*/true)) {
      out.emplace_back(item.key(), item.value());
    }
    return out;
  }

  ModuleHolder module_;
};

}  // namespace ddp
