#include "snapshot_state_copy.h"

#include <torch/cuda.h>

#include <typeinfo>

namespace ddp::detail {
namespace {

torch::Tensor copy_of(const torch::Tensor& tensor, bool* on_cuda) {
  if (!tensor.defined()) return tensor;
  if (tensor.is_cuda()) *on_cuda = true;
  torch::Tensor copy = tensor.detach().clone();
  copy.set_requires_grad(tensor.requires_grad());
  return copy;
}

// The state of one parameter with its tensors cloned (a copy of the struct shares them).
void clone_tensors(torch::optim::SGDParamState& s, bool* cuda) {
  s.momentum_buffer(copy_of(s.momentum_buffer(), cuda));
}
void clone_tensors(torch::optim::AdamParamState& s, bool* cuda) {
  s.exp_avg(copy_of(s.exp_avg(), cuda));
  s.exp_avg_sq(copy_of(s.exp_avg_sq(), cuda));
  s.max_exp_avg_sq(copy_of(s.max_exp_avg_sq(), cuda));
}
void clone_tensors(torch::optim::AdamWParamState& s, bool* cuda) {
  s.exp_avg(copy_of(s.exp_avg(), cuda));
  s.exp_avg_sq(copy_of(s.exp_avg_sq(), cuda));
  s.max_exp_avg_sq(copy_of(s.max_exp_avg_sq(), cuda));
}
void clone_tensors(torch::optim::AdagradParamState& s, bool* cuda) {
  s.sum(copy_of(s.sum(), cuda));
}
void clone_tensors(torch::optim::RMSpropParamState& s, bool* cuda) {
  s.square_avg(copy_of(s.square_avg(), cuda));
  s.momentum_buffer(copy_of(s.momentum_buffer(), cuda));
  s.grad_avg(copy_of(s.grad_avg(), cuda));
}

// An optimizer of exactly type `Optim` (not a subclass: its save() may write more) over the
// same parameter groups, holding a deep copy of `live`'s state; null when `live` is another
// type.
template <typename Optim, typename Options, typename State>
std::shared_ptr<torch::optim::Optimizer> copy_if(const torch::optim::Optimizer& live,
                                                 bool* on_cuda) {
  if (typeid(live) != typeid(Optim)) return nullptr;
  auto copy =
      std::make_shared<Optim>(live.param_groups(), static_cast<const Options&>(live.defaults()));
  for (const auto& [key, state] : live.state()) {
    auto state_copy = std::make_unique<State>(static_cast<const State&>(*state));
    clone_tensors(*state_copy, on_cuda);
    copy->state()[key] = std::move(state_copy);
  }
  return copy;
}

std::shared_ptr<torch::optim::Optimizer> copy_optimizer(const torch::optim::Optimizer& live,
                                                        bool* on_cuda) {
  namespace o = torch::optim;
  if (auto c = copy_if<o::SGD, o::SGDOptions, o::SGDParamState>(live, on_cuda)) return c;
  if (auto c = copy_if<o::Adam, o::AdamOptions, o::AdamParamState>(live, on_cuda)) return c;
  if (auto c = copy_if<o::AdamW, o::AdamWOptions, o::AdamWParamState>(live, on_cuda)) return c;
  if (auto c = copy_if<o::Adagrad, o::AdagradOptions, o::AdagradParamState>(live, on_cuda)) {
    return c;
  }
  return copy_if<o::RMSprop, o::RMSpropOptions, o::RMSpropParamState>(live, on_cuda);
}

}  // namespace

std::optional<StateCopy> StateCopy::take(const torch::nn::Module& model,
                                         const torch::optim::Optimizer* optimizer) {
  StateCopy copy;
  bool on_cuda = false;
  if (optimizer != nullptr) {
    copy.optimizer_ = copy_optimizer(*optimizer, &on_cuda);
    if (!copy.optimizer_) return std::nullopt;
  }
  copy.model_ = copy_module(model, &on_cuda);
  // The clones were queued on this thread's stream; the writer thread reads them on its own.
  if (on_cuda) torch::cuda::synchronize();
  return copy;
}

// The traversal of nn::Module::save(): own parameters, own buffers, serialisable children.
StateCopy::ModuleCopy StateCopy::copy_module(const torch::nn::Module& module, bool* on_cuda) {
  ModuleCopy copy;
  for (const auto& p : module.named_parameters(/*recurse=*/false)) {
    copy.parameters.emplace_back(p.key(), copy_of(p.value(), on_cuda));
  }
  for (const auto& b : module.named_buffers(/*recurse=*/false)) {
    copy.buffers.emplace_back(b.key(), copy_of(b.value(), on_cuda));
  }
  for (const auto& child : module.named_children()) {
    if (child.value()->is_serializable()) {
      copy.children.emplace_back(child.key(), copy_module(*child.value(), on_cuda));
    }
  }
  return copy;
}

void StateCopy::write_module(const ModuleCopy& copy, torch::serialize::OutputArchive& archive) {
  for (const auto& [name, tensor] : copy.parameters) archive.write(name, tensor);
  for (const auto& [name, tensor] : copy.buffers) archive.write(name, tensor, /*is_buffer=*/true);
  for (const auto& [name, child] : copy.children) {
    torch::serialize::OutputArchive child_archive(archive.compilation_unit());
    write_module(child, child_archive);
    archive.write(name, child_archive);
  }
}

void StateCopy::write(torch::serialize::OutputArchive& archive) const {
  torch::serialize::OutputArchive model_archive(archive.compilation_unit());
  write_module(model_, model_archive);
  archive.write("model", model_archive);
  if (optimizer_) {
    torch::serialize::OutputArchive optimizer_archive(archive.compilation_unit());
    optimizer_->save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  }
}

}  // namespace ddp::detail
