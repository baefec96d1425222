#include "ddp/comm_hooks.h"

#include <torch/torch.h>

#include "ddp/process_group.h"

namespace ddp {
namespace {

class AllReduceHook final : public CommHook {
 public:
  PendingBucket start(ProcessGroup& group, GradBucket& bucket) override {
    at::Tensor buffer = bucket.buffer;
    Request request = group.all_reduce_async(buffer);
    const int size = group.size();
    return [request, buffer, size]() mutable {
      request.wait();
      return buffer.div_(size);
    };
  }
};

class Fp16CompressHook final : public CommHook {
 public:
  PendingBucket start(ProcessGroup& group, GradBucket& bucket) override {
    // Dividing before the cast keeps the fp16 sum of many ranks from overflowing.
    at::Tensor compressed = bucket.buffer.div(group.size()).to(torch::kHalf).contiguous();
    Request request = group.all_reduce_async(compressed);
    at::Tensor buffer = bucket.buffer;
    return [request, compressed, buffer]() mutable {
      request.wait();
      return buffer.copy_(compressed);
    };
  }
};

}  // namespace

std::shared_ptr<CommHook> make_allreduce_hook() { return std::make_shared<AllReduceHook>(); }
std::shared_ptr<CommHook> make_fp16_compress_hook() { return std::make_shared<Fp16CompressHook>(); }

}  // namespace ddp
