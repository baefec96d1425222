// The per-channel statistics SyncBatchNorm needs, in the shape of ATen's batch-norm
// statistics ops (which it calls for CUDA tensors): the same quantities, computed with
// ordinary tensor ops for CPU tensors (LibTorch 1.13 has no CPU kernels for them; see
// torch_compat.h). Channels are dim 1; every other dim is reduced.
#pragma once

#include <tuple>

#include <ATen/Tensor.h>

namespace ddp::detail {

// Local mean and 1/sqrt(biased var + eps) per channel.
std::tuple<at::Tensor, at::Tensor> bn_stats(const at::Tensor& input, double eps);

// Combines every rank's (mean, invstd) [ranks, C] with their sample counts [ranks]: the
// global mean and invstd; updates running_mean/var in place when defined (unbiased variance,
// as BatchNorm), with `momentum` as the update factor.
std::tuple<at::Tensor, at::Tensor> bn_gather_stats(const at::Tensor& input, const at::Tensor& means,
                                                   const at::Tensor& invstds,
                                                   const at::Tensor& running_mean,
                                                   const at::Tensor& running_var, double momentum,
                                                   double eps, const at::Tensor& counts);

// (input - mean) * invstd * weight + bias, per channel (weight/bias may be undefined).
at::Tensor bn_elemt(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                    const at::Tensor& mean, const at::Tensor& invstd, double eps);

// Local sums over the batch: sum_dy, sum_dy_xmu = sum(dy * (x - mean)), and the local
// weight and bias gradients (undefined when not wanted).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> bn_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const at::Tensor& weight, bool weight_grad, bool bias_grad);

// The input gradient from the global sums; counts: every rank's sample count (int32).
at::Tensor bn_backward_elemt(const at::Tensor& grad_out, const at::Tensor& input,
                             const at::Tensor& mean, const at::Tensor& invstd,
                             const at::Tensor& weight, const at::Tensor& sum_dy,
                             const at::Tensor& sum_dy_xmu, const at::Tensor& counts);

}  // namespace ddp::detail
