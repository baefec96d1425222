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
//   no_sync()). Every rank must run the same number of synchronised backward passes.
// - Gradients are reduced by bucket as they become ready, overlapping the rest of backward.
// - Errors (a peer gone, a timeout, a parameter without gradient) surface from backward() as
//   ddp::Error. Not thread-safe: one training thread per wrapper.
// - The wrapper shares the module (ModuleHolder semantics); the module must outlive nothing.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "ddp/detail/reducer.h"
#include "ddp/process_group.h"

namespace ddp {

// Restores synchronisation when it goes out of scope; see DistributedDataParallel::no_sync().
class NoSyncGuard {
 public:
  explicit NoSyncGuard(detail::Reducer& reducer) : reducer_(&reducer), previous_(reducer.sync()) {
    reducer_->set_sync(false);
  }
  ~NoSyncGuard() {
    if (reducer_) reducer_->set_sync(previous_);
  }
  NoSyncGuard(NoSyncGuard&& other) noexcept
      : reducer_(std::exchange(other.reducer_, nullptr)), previous_(other.previous_) {}
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(NoSyncGuard&&) = delete;

 private:
  detail::Reducer* reducer_;
  bool previous_;
};

// ModuleHolder: a TORCH_MODULE holder (e.g. torch::nn::Linear, or your own Net).
template <class ModuleHolder>
class DistributedDataParallel {
 public:
  DistributedDataParallel(ModuleHolder module, std::shared_ptr<ProcessGroup> group,
                          DdpOptions options = {})
      : module_(std::move(module)),
        reducer_(std::make_unique<detail::Reducer>(std::move(group), named_params(*module_),
                                                   module_->buffers(), std::move(options))) {}

  // Runs the module's forward (after broadcasting buffers when training).
  template <class... Args>
  decltype(auto) forward(Args&&... args) {
    reducer_->before_forward(module_->is_training());
    return module_->forward(std::forward<Args>(args)...);
  }
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    return forward(std::forward<Args>(args)...);
  }

  // Gradients of backward passes run while the guard lives accumulate locally; the next
  // synchronised backward averages the accumulated sum (gradient accumulation).
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*reducer_); }

  // The wrapped module: for parameters(), train()/eval(), save().
  ModuleHolder& module() { return module_; }
  ProcessGroup& group() { return reducer_->group(); }
  DdpStats stats() const { return reducer_->stats(); }

 private:
  static std::vector<std::pair<std::string, at::Tensor>> named_params(torch::nn::Module& m) {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& item : m.named_parameters(/*recurse=*/true)) {
      out.emplace_back(item.key(), item.value());
    }
    return out;
  }

  ModuleHolder module_;
  std::unique_ptr<detail::Reducer> reducer_;
};

}  // namespace ddp
