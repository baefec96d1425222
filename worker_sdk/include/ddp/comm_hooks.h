// Communication hooks: how the DDP reducer turns one bucket of local gradients into the
// group's average. Mirrors torch.distributed's register_comm_hook, in C++.
//
//   ddp::DdpOptions options;
//   options.comm_hook = ddp::make_powersgd_hook({.matrix_approximation_rank = 2});
//   ddp::DistributedDataParallel model(net, group, options);
//
// Contract
// - start() is called from an autograd thread as soon as a bucket is complete, in bucket
//   order, identically on every rank. It must start communication and return without
//   waiting for it; the returned PendingBucket is called later, from the thread running
//   backward(), in bucket order after every start() of the pass, and blocks until the
//   result is ready. Collectives a hook issues must follow this order on every rank.
// - The result has bucket.buffer's shape and dtype and holds the *average* over the group.
// - A hook may keep state (e.g. error feedback); the reducer calls it from one thread at a
//   time. Exceptions thrown by either call surface from backward() as ddp::Error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "ddp/export.h"

namespace ddp {

class ProcessGroup;

struct GradBucket {
  int index = 0;      // 0 is the first bucket reduced
  at::Tensor buffer;  // flat, contiguous local gradients; the hook may modify it
  // Views of `buffer`, one per parameter, with the parameter's shape (buffer order).
  std::vector<at::Tensor> gradients;
  std::vector<std::string> parameter_names;  // in buffer order
  bool is_last = false;                      // the final bucket of this backward pass
};

using PendingBucket = std::function<at::Tensor()>;

class DDP_API CommHook {
 public:
  virtual ~CommHook() = default;
  virtual PendingBucket start(ProcessGroup& group, GradBucket& bucket) = 0;
};

// Sums the bucket across the group and divides by the group size (DDP's default).
DDP_API std::shared_ptr<CommHook> make_allreduce_hook();

// Casts the bucket to float16, averages it, and casts back: half the bytes on the wire at
// the cost of fp16 precision (torch's fp16_compress_hook).
DDP_API std::shared_ptr<CommHook> make_fp16_compress_hook();

// The same with bfloat16 (torch's bf16_compress_hook): fp32's range, 8 bits of mantissa.
// Gloo cannot sum bfloat16, so on Gloo the bucket travels as bfloat16 bits in a
// reduce-scatter (all-to-all, then a float32 sum of the n chunks, rounded to bfloat16) and
// an all-gather: the same bytes as a bfloat16 all-reduce. NCCL sums bfloat16 itself.
DDP_API std::shared_ptr<CommHook> make_bf16_compress_hook();

// PowerSGD (Vogels et al., 2019), as torch's powerSGD_hook (torch 1.13): each gradient
// matrix M (a parameter's gradient viewed as shape[0] x rest) that is worth compressing is
// sent as two thin matrices, P = M Q (all-reduced, then orthogonalised) and Q = M^T P
// (all-reduced and averaged), and replaced by P Q^T. Vectors (biases) and matrices where
// compression would not save min_compression_rate times are all-reduced as they are.
struct PowerSgdOptions {
  // Rank r of the approximation: (n + m) r numbers instead of n m per matrix. 1-4 is usual.
  int matrix_approximation_rank = 1;
  // Plain all-reduce for this many iterations first (accuracy is sensitive early on).
  // PyTorch's default. Must be >= 2 with error feedback or warm start, because DDP rebuilds
  // its buckets after the first iteration (as in PyTorch).
  std::int64_t start_powersgd_iter = 1000;
  // Compress a matrix only if n m > min_compression_rate (n + m) r.
  double min_compression_rate = 2;
  // Add last iteration's compression error to the gradient before compressing.
  bool use_error_feedback = true;
  // Start each iteration's power iteration from the previous Q instead of a random one.
  bool warm_start = true;
  // Added to column norms in Gram-Schmidt (0: none, as PyTorch's default).
  double orthogonalization_epsilon = 0;
  // Seeds the random initial Q; identical on every rank (numpy.random.RandomState semantics,
  // so the same seed draws the same Q as PyTorch).
  std::uint32_t random_seed = 0;
};

// What a PowerSGD hook has done so far (its counters are per process).
struct PowerSgdStats {
  std::int64_t iterations = 0;  // backward passes seen (PyTorch's state.iter)
  std::int64_t numel_before_compression = 0;
  std::int64_t numel_after_compression = 0;  // what was all-reduced instead
};

class DDP_API PowerSgdHook : public CommHook {
 public:
  virtual PowerSgdStats stats() const = 0;
};

// Throws ddp::Error("make_powersgd_hook") on invalid options.
DDP_API std::shared_ptr<PowerSgdHook> make_powersgd_hook(const PowerSgdOptions& options = {});

}  // namespace ddp
