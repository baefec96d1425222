#include "ddp/sync_batch_norm.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/torch.h>

#include "batch_norm_stats.h"
#include "ddp/error.h"

namespace ddp {
namespace {

constexpr const char* kOp = "SyncBatchNorm";

// Forward and backward with the group's statistics (torch/nn/modules/_functions.py's
// SyncBatchNorm, in C++). The group rides in ctx->saved_data as a raw pointer: the module
// holds it for as long as its graph can be backpropagated.
struct SyncBatchNormFunction : torch::autograd::Function<SyncBatchNormFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor input,
                            at::Tensor weight, at::Tensor bias, at::Tensor running_mean,
                            at::Tensor running_var, double eps, double momentum,
                            ProcessGroup* group) {
    input = input.contiguous();
    const int64_t channels = input.size(1);
    const double count = static_cast<double>(input.numel() / std::max<int64_t>(channels, 1));
    at::Tensor mean, invstd;
    if (count > 0) {
      std::tie(mean, invstd) = detail::bn_stats(input, eps);
    } else {  // an empty batch on this rank contributes nothing
      mean = torch::zeros({channels}, input.options());
      invstd = torch::zeros({channels}, input.options());
    }
    // One message: [mean (C), invstd (C), count] per rank.
    at::Tensor packed = torch::cat({mean, invstd, torch::full({1}, count, mean.options())});
    at::Tensor all = torch::stack(group->all_gather(packed));  // [ranks, 2C + 1]
    at::Tensor counts = all.select(1, 2 * channels);
    if (counts.sum().item<double>() <= 1) {
      throw Error(group->global_rank(), kOp,
                  "expected more than 1 value per channel when training across the group, got "
                  "input of size " +
                      c10::str(input.sizes()));
    }
    std::tie(mean, invstd) = detail::bn_gather_stats(
        input, all.narrow(1, 0, channels), all.narrow(1, channels, channels), running_mean,
        running_var, momentum, eps, counts);
    ctx->save_for_backward({input, weight, mean, invstd, counts.to(torch::kInt)});
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
    return detail::bn_elemt(input, weight, bias, mean, invstd, eps);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& mean = saved[2];
    const at::Tensor& invstd = saved[3];
    const at::Tensor& counts = saved[4];
    auto* group = reinterpret_cast<ProcessGroup*>(ctx->saved_data["group"].toInt());
    at::Tensor grad_out = grads[0].contiguous();
    const int64_t channels = input.size(1);
    const bool weight_grad = weight.defined() && weight.requires_grad();
    auto [sum_dy, sum_dy_xmu, grad_weight, grad_bias] =
        detail::bn_backward_reduce(grad_out, input, mean, invstd, weight, weight_grad, weight_grad);
    // The input gradient needs the sums over the whole group's batch.
    at::Tensor sums = torch::cat({sum_dy, sum_dy_xmu});
    group->all_reduce(sums);
    at::Tensor grad_input = detail::bn_backward_elemt(grad_out, input, mean, invstd, weight,
                                                      sums.narrow(0, 0, channels),
                                                      sums.narrow(0, channels, channels), counts);
    // weight and bias gradients stay local: DDP averages them like any other parameter's.
    return {grad_input,   grad_weight,  grad_bias,    at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

template <class BatchNormHolder>
SyncBatchNorm from_batch_norm(const BatchNormHolder& bn, std::shared_ptr<ProcessGroup> group) {
  const auto& o = bn->options;
  // Built bare (nothing registered), then given the BatchNorm's own tensors: shared, not
  // copied, since an optimizer may already hold these parameters.
  torch::nn::BatchNormOptions bare(o.num_features());
  bare.eps(o.eps()).momentum(o.momentum()).affine(false).track_running_stats(false);
  SyncBatchNorm out(bare, std::move(group));
  out->options.affine(o.affine()).track_running_stats(o.track_running_stats());
  if (o.affine()) {
    out->weight = out->register_parameter("weight", bn->weight);
    out->bias = out->register_parameter("bias", bn->bias);
  }
  if (o.track_running_stats()) {
    out->running_mean = out->register_buffer("running_mean", bn->running_mean);
    out->running_var = out->register_buffer("running_var", bn->running_var);
    out->num_batches_tracked = out->register_buffer("num_batches_tracked", bn->num_batches_tracked);
  }
  out->train(bn->is_training());
  return out;
}

bool has_batch_norm(const torch::nn::Module& m, std::string* where, const std::string& path) {
  for (const auto& child : m.named_children()) {
    const std::string name = path.empty() ? child.key() : path + "." + child.key();
    const auto* raw = child.value().get();
    if (dynamic_cast<const torch::nn::BatchNorm1dImpl*>(raw) ||
        dynamic_cast<const torch::nn::BatchNorm2dImpl*>(raw) ||
        dynamic_cast<const torch::nn::BatchNorm3dImpl*>(raw)) {
      *where = name;
      return true;
    }
    if (has_batch_norm(*child.value(), where, name)) return true;
  }
  return false;
}

// The SyncBatchNorm for a BatchNorm module, else nullptr.
SyncBatchNorm convert_batch_norm(const std::shared_ptr<torch::nn::Module>& module,
                                 const std::shared_ptr<ProcessGroup>& group) {
  if (auto bn = std::dynamic_pointer_cast<torch::nn::BatchNorm1dImpl>(module)) {
    return from_batch_norm(torch::nn::BatchNorm1d(bn), group);
  }
  if (auto bn = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(module)) {
    return from_batch_norm(torch::nn::BatchNorm2d(bn), group);
  }
  if (auto bn = std::dynamic_pointer_cast<torch::nn::BatchNorm3dImpl>(module)) {
    return from_batch_norm(torch::nn::BatchNorm3d(bn), group);
  }
  return SyncBatchNorm(nullptr);
}

// A module that holds a BatchNorm but cannot be rebuilt from outside.
[[noreturn]] void cannot_convert(const std::shared_ptr<ProcessGroup>& group,
                                 const std::string& where) {
  throw Error(group ? group->global_rank() : -1, "convert_sync_batchnorm",
              "'" + where +
                  "' is a BatchNorm inside a module of its own type, which LibTorch cannot "
                  "rebuild from outside (its forward() calls the member, not the module "
                  "registry): declare that layer as ddp::SyncBatchNorm");
}

// Converted (a new module), or nullptr when `module` holds nothing to convert.
std::shared_ptr<torch::nn::Module> convert_module(const std::shared_ptr<torch::nn::Module>& module,
                                                  const std::shared_ptr<ProcessGroup>& group,
                                                  const std::string& path) {
  if (auto sync = convert_batch_norm(module, group)) return sync.ptr();
  if (auto list = std::dynamic_pointer_cast<torch::nn::ModuleListImpl>(module)) {
    return convert_sync_batchnorm(torch::nn::ModuleList(list), group).ptr();
  }
  if (auto seq = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(module)) {
    return convert_sync_batchnorm(torch::nn::Sequential(seq), group).ptr();
  }
  std::string where;
  if (has_batch_norm(*module, &where, path)) cannot_convert(group, where);
  return nullptr;
}

}  // namespace

SyncBatchNormImpl::SyncBatchNormImpl(const torch::nn::BatchNormOptions& options_,
                                     std::shared_ptr<ProcessGroup> group_)
    : options(options_), group(std::move(group_)) {
  reset();
}

void SyncBatchNormImpl::reset() {
  if (options.affine()) {
    weight = register_parameter("weight", torch::empty({options.num_features()}));
    bias = register_parameter("bias", torch::empty({options.num_features()}));
  }
  if (options.track_running_stats()) {
    running_mean = register_buffer("running_mean", torch::zeros({options.num_features()}));
    running_var = register_buffer("running_var", torch::ones({options.num_features()}));
    num_batches_tracked = register_buffer("num_batches_tracked", torch::tensor(0, torch::kLong));
  }
  reset_parameters();
}

void SyncBatchNormImpl::reset_running_stats() {
  if (!options.track_running_stats()) return;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void SyncBatchNormImpl::reset_parameters() {
  reset_running_stats();
  if (!options.affine()) return;
  torch::NoGradGuard no_grad;
  weight.fill_(1);
  bias.zero_();
}

at::Tensor SyncBatchNormImpl::forward(const at::Tensor& input) {
  if (input.dim() < 2 || input.size(1) != options.num_features()) {
    throw Error(group ? group->global_rank() : -1, kOp,
                "expected input [N, " + std::to_string(options.num_features()) + ", ...], got " +
                    c10::str(input.sizes()));
  }
  double factor = 0.0;
  if (is_training() && options.track_running_stats()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
    factor = options.momentum().has_value() ? *options.momentum()
                                            : 1.0 / num_batches_tracked.item<double>();
  }
  // Batch statistics when training, or when there are no running ones to use.
  const bool batch_stats = is_training() || !options.track_running_stats();
  std::shared_ptr<ProcessGroup> g = group ? group : default_group();
  const bool synced = batch_stats && is_training() && g && g->size() > 1;
  if (is_training() && !g) {
    throw Error(-1, kOp,
                "no process group: call ddp::init_process_group() or set SyncBatchNormImpl::group");
  }
  at::Tensor rm = !is_training() || options.track_running_stats() ? running_mean : at::Tensor();
  at::Tensor rv = !is_training() || options.track_running_stats() ? running_var : at::Tensor();
  if (!synced) {
    return torch::batch_norm(input, weight, bias, rm, rv, batch_stats, factor, options.eps(),
                             at::globalContext().userEnabledCuDNN());
  }
  return SyncBatchNormFunction::apply(input, weight, bias, rm, rv, options.eps(), factor, g.get());
}

SyncBatchNorm convert_sync_batchnorm(const torch::nn::BatchNorm1d& bn,
                                     std::shared_ptr<ProcessGroup> group) {
  return from_batch_norm(bn, std::move(group));
}
SyncBatchNorm convert_sync_batchnorm(const torch::nn::BatchNorm2d& bn,
                                     std::shared_ptr<ProcessGroup> group) {
  return from_batch_norm(bn, std::move(group));
}
SyncBatchNorm convert_sync_batchnorm(const torch::nn::BatchNorm3d& bn,
                                     std::shared_ptr<ProcessGroup> group) {
  return from_batch_norm(bn, std::move(group));
}

torch::nn::Sequential convert_sync_batchnorm(const torch::nn::Sequential& model,
                                             std::shared_ptr<ProcessGroup> group) {
  torch::nn::Sequential out;
  std::size_t i = 0;
  for (const auto& element : *model) {
    const std::string path = std::to_string(i++);
    if (auto sync = convert_batch_norm(element.ptr(), group)) {
      out->push_back(path, sync.ptr());
      continue;
    }
    std::string where;
    if (has_batch_norm(*element.ptr(), &where, path)) cannot_convert(group, where);
    out->push_back(path, torch::nn::AnyModule(element));
  }
  out->train(model->is_training());
  return out;
}

torch::nn::ModuleList convert_sync_batchnorm(const torch::nn::ModuleList& model,
                                             std::shared_ptr<ProcessGroup> group) {
  torch::nn::ModuleList out;
  std::size_t i = 0;
  for (const auto& element : *model) {
    auto converted = convert_module(element, group, std::to_string(i++));
    out->push_back(converted ? converted : element);
  }
  out->train(model->is_training());
  return out;
}

}  // namespace ddp
