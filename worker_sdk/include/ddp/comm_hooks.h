// Communication hooks: how the DDP reducer turns one bucket of local gradients into the
// group's average. Mirrors torch.distributed's register_comm_hook, in C++.
//
// Contract
// - start() is called from an autograd thread as soon as a bucket is complete, in bucket
//   order, identically on every rank. It must start communication and return without
//   waiting for it; the returned PendingBucket is called later, from the thread running
//   backward(), and blocks until the result is ready.
// - The result has bucket.buffer's shape and dtype and holds the *average* over the group.
// - A hook may keep state (e.g. error feedback); the reducer calls it from one thread at a
//   time. Exceptions thrown by either call surface from backward() as ddp::Error.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

namespace ddp {

class ProcessGroup;

struct GradBucket {
  int index = 0;      // 0 is the first bucket reduced (the last parameters registered)
  at::Tensor buffer;  // flat, contiguous local gradients; the hook may modify it
  std::vector<std::string> parameter_names;  // in buffer order
  bool is_last = false;                      // the final bucket of this backward pass
};

using PendingBucket = std::function<at::Tensor()>;

class CommHook {
 public:
  virtual ~CommHook() = default;
  virtual PendingBucket start(ProcessGroup& group, GradBucket& bucket) = 0;
};

// Sums the bucket across the group and divides by the group size (DDP's default).
std::shared_ptr<CommHook> make_allreduce_hook();

// Casts the bucket to float16, averages it, and casts back: half the bytes on the wire at
// the cost of fp16 precision (torch's fp16_compress_hook).
std::shared_ptr<CommHook> make_fp16_compress_hook();

}  // namespace ddp
