// What a background save takes from the training thread: a copy in memory of the model's
// parameters and buffers and of the optimizer's state, serialised later on the writer thread
// into exactly the archive that `model.save()` and `optimizer->save()` write.
//
// Why: serialising into LibTorch's archive (pickling, the zip container and its CRC-32 over
// every byte) costs several times a plain copy of the tensors, and training would pay for it
// at every save. The copy is what training must pay (the state it goes on to change), the rest
// can overlap the next steps.
//
// What is copied, and when it is not possible:
// - The model: every module's own parameters and buffers and its serialisable children, in
//   the order nn::Module::save() writes them (load() reads them back unchanged). A module
//   class that overrides save() to write something else is not seen here: such a program sets
//   SnapshotOptions::serialise_in_background = false.
// - The optimizer: LibTorch's SGD, Adam, AdamW, Adagrad and RMSprop, their per-parameter state
//   tensors cloned. Another optimizer (LBFGS, a program's own class) cannot be copied without
//   knowing its state: take() then returns nullopt and the caller serialises on its thread.
// - Tensors stay on their device (a CUDA model's copy is in GPU memory for the time of the
//   write); the copies are complete when take() returns (a CUDA stream is synchronised).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ddp::detail {

class StateCopy {
 public:
  // On the training thread. nullopt when `optimizer` is of a type not listed above.
  static std::optional<StateCopy> take(const torch::nn::Module& model,
                                       const torch::optim::Optimizer* optimizer);

  // On any thread, once: writes "model" (and "optimizer" when there was one) into `archive`.
  void write(torch::serialize::OutputArchive& archive) const;

 private:
  struct ModuleCopy {
    std::vector<std::pair<std::string, torch::Tensor>> parameters;
    std::vector<std::pair<std::string, torch::Tensor>> buffers;
    std::vector<std::pair<std::string, ModuleCopy>> children;
  };
  static ModuleCopy copy_module(const torch::nn::Module& module, bool* on_cuda);
  static void write_module(const ModuleCopy& copy, torch::serialize::OutputArchive& archive);

  ModuleCopy model_;
  // An optimizer of the same type over the same parameter groups (only their identities are
  // serialised, never their values), holding the cloned state.
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace ddp::detail
