// ddp::SyncBatchNorm: batch normalisation whose statistics cover the whole global batch
// (every rank's samples), as torch.nn.SyncBatchNorm. A model trained with it on n ranks
// computes what one process computes with BatchNorm on the union of the n batches.
//
//   struct NetImpl : torch::nn::Module {
//     torch::nn::Conv2d conv{...};
//     ddp::SyncBatchNorm bn{ddp::SyncBatchNorm(32)};   // instead of torch::nn::BatchNorm2d
//     ...
//   };
//   auto seq = ddp::convert_sync_batchnorm(torch::nn::Sequential(...BatchNorm2d(32)...));
//
// Contract
// - Input of any rank >= 2 ([N, C, ...], like BatchNorm1d/2d/3d); C == num_features.
// - Training (and track_running_stats off, or no group of size > 1): forward all-gathers
//   each rank's per-channel mean, variance and count (one collective), normalises with the
//   global ones and updates the running statistics with them (unbiased variance, as
//   BatchNorm); backward all-reduces the per-channel sums of the gradient (one collective).
//   Both are collectives: every rank runs the same forwards and backwards. Ranks may have
//   different batch sizes.
// - Evaluation (or a group of size 1): exactly torch::nn::BatchNorm's computation.
// - Parameters and buffers are named as BatchNorm's (weight, bias, running_mean,
//   running_var, num_batches_tracked), so state dicts and snapshots interchange.
// - The group: SyncBatchNormImpl::group, or the default group (ddp::default_group()) at
//   forward time when null.
#pragma once

#include <memory>

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/options/batchnorm.h>
#include <torch/nn/pimpl.h>

#include "ddp/export.h"
#include "ddp/process_group.h"

namespace ddp {

class DDP_API SyncBatchNormImpl : public torch::nn::Cloneable<SyncBatchNormImpl> {
 public:
  explicit SyncBatchNormImpl(int64_t num_features)
      : SyncBatchNormImpl(torch::nn::BatchNormOptions(num_features)) {}
  explicit SyncBatchNormImpl(const torch::nn::BatchNormOptions& options,
                             std::shared_ptr<ProcessGroup> group = nullptr);

  void reset() override;
  void reset_running_stats();
  void reset_parameters();
  at::Tensor forward(const at::Tensor& input);

  torch::nn::BatchNormOptions options;
  std::shared_ptr<ProcessGroup> group;                        // nullptr: the default group
  at::Tensor weight, bias;                                    // undefined unless options.affine()
  at::Tensor running_mean, running_var, num_batches_tracked;  // undefined unless tracked
};
TORCH_MODULE(SyncBatchNorm);

// PyTorch's convert_sync_batchnorm, for the modules LibTorch lets one rebuild: a BatchNorm
// layer becomes a SyncBatchNorm sharing its parameters and buffers; a Sequential or
// ModuleList becomes a new one whose BatchNorm layers (at any depth of nested containers)
// are converted and whose other elements are the same modules. A BatchNorm inside a module
// of your own cannot be swapped from outside in C++ (its forward calls its member, not the
// registry): that is a ddp::Error naming it; declare such layers as ddp::SyncBatchNorm.
DDP_API SyncBatchNorm convert_sync_batchnorm(const torch::nn::BatchNorm1d& bn,
                                             std::shared_ptr<ProcessGroup> group = nullptr);
DDP_API SyncBatchNorm convert_sync_batchnorm(const torch::nn::BatchNorm2d& bn,
                                             std::shared_ptr<ProcessGroup> group = nullptr);
DDP_API SyncBatchNorm convert_sync_batchnorm(const torch::nn::BatchNorm3d& bn,
                                             std::shared_ptr<ProcessGroup> group = nullptr);
DDP_API torch::nn::Sequential convert_sync_batchnorm(const torch::nn::Sequential& model,
                                                     std::shared_ptr<ProcessGroup> group = nullptr);
DDP_API torch::nn::ModuleList convert_sync_batchnorm(const torch::nn::ModuleList& model,
                                                     std::shared_ptr<ProcessGroup> group = nullptr);

}  // namespace ddp
