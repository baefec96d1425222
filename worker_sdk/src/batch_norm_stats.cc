#include "batch_norm_stats.h"

#include <torch/torch.h>

#include "detail/torch_compat.h"

namespace ddp::detail {
namespace {

// Every dim but the channels'.
std::vector<int64_t> reduced_dims(const at::Tensor& input) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector [C] shaped to broadcast against input [N, C, ...].
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& input) {
  std::vector<int64_t> shape(static_cast<std::size_t>(input.dim()), 1);
  shape[1] = v.numel();
  return v.view(shape);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> bn_stats(const at::Tensor& input, double eps) {
  if (compat::aten_batch_norm_stats_on(input)) return at::batch_norm_stats(input, eps);
  const auto dims = reduced_dims(input);
  at::Tensor mean = input.mean(dims);
  at::Tensor var = (input - per_channel(mean, input)).pow(2).mean(dims);
  return {mean, (var + eps).rsqrt()};
}

std::tuple<at::Tensor, at::Tensor> bn_gather_stats(const at::Tensor& input, const at::Tensor& means,
                                                   const at::Tensor& invstds,
                                                   const at::Tensor& running_mean,
                                                   const at::Tensor& running_var, double momentum,
                                                   double eps, const at::Tensor& counts) {
  if (compat::aten_batch_norm_stats_on(input)) {
    return at::batch_norm_gather_stats_with_counts(input, means, invstds, running_mean, running_var,
                                                   momentum, eps, counts);
  }
  // Parallel variance: the global variance is the count-weighted mean of each rank's
  // variance plus the spread of the ranks' means around the global mean.
  at::Tensor n = counts.to(means.scalar_type()).unsqueeze(1);  // [ranks, 1]
  at::Tensor total = n.sum();
  at::Tensor vars = invstds.pow(-2) - eps;
  at::Tensor mean = (n * means).sum(0) / total;
  at::Tensor var = (n * (vars + (means - mean).pow(2))).sum(0) / total;
  torch::NoGradGuard no_grad;
  if (running_mean.defined()) running_mean.mul_(1 - momentum).add_(mean, momentum);
  if (running_var.defined()) {
    at::Tensor unbiased = var * total / (total - 1);
    running_var.mul_(1 - momentum).add_(unbiased.to(running_var.scalar_type()), momentum);
  }
  return {mean, (var + eps).rsqrt()};
}

at::Tensor bn_elemt(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                    const at::Tensor& mean, const at::Tensor& invstd, double eps) {
  if (compat::aten_batch_norm_stats_on(input)) {
    return at::batch_norm_elemt(input, weight, bias, mean, invstd, eps);
  }
  at::Tensor out = (input - per_channel(mean, input)) * per_channel(invstd, input);
  if (weight.defined()) out = out * per_channel(weight, input);
  if (bias.defined()) out = out + per_channel(bias, input);
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> bn_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const at::Tensor& weight, bool weight_grad, bool bias_grad) {
  if (compat::aten_batch_norm_stats_on(input)) {
    return at::batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, true, weight_grad,
                                          bias_grad);
  }
  const auto dims = reduced_dims(input);
  at::Tensor sum_dy = grad_out.sum(dims);
  at::Tensor sum_dy_xmu = (grad_out * (input - per_channel(mean, input))).sum(dims);
  return {sum_dy, sum_dy_xmu, weight_grad ? sum_dy_xmu * invstd : at::Tensor(),
          bias_grad ? sum_dy : at::Tensor()};
}

at::Tensor bn_backward_elemt(const at::Tensor& grad_out, const at::Tensor& input,
                             const at::Tensor& mean, const at::Tensor& invstd,
                             const at::Tensor& weight, const at::Tensor& sum_dy,
                             const at::Tensor& sum_dy_xmu, const at::Tensor& counts) {
  if (compat::aten_batch_norm_stats_on(input)) {
    return at::batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu,
                                         counts);
  }
  const double total = counts.sum().item<double>();
  at::Tensor mean_dy = sum_dy / total;
  at::Tensor mean_dy_xmu = sum_dy_xmu / total;
  at::Tensor scale = weight.defined() ? invstd * weight : invstd;
  return (grad_out - per_channel(mean_dy, input) -
          (input - per_channel(mean, input)) * per_channel(invstd.pow(2) * mean_dy_xmu, input)) *
         per_channel(scale, input);
}

}  // namespace ddp::detail
