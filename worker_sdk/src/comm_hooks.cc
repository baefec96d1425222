// The built-in communication hooks but PowerSGD (powersgd_hook.cc).
#include "ddp/comm_hooks.h"

#include <torch/torch.h>

#include "ddp/process_group.h"
#include "group_state.h"

namespace ddp {
namespace {

class AllReduceHook final : public CommHook {
 public:
  PendingBucket start(ProcessGroup& group, GradBucket& bucket) override {
    at::Tensor buffer = bucket.buffer;
    if (detail::intra_node_eligible(group, buffer)) {
      // Shared memory: nothing to start (no transport thread to hand the work to); the
      // reduction runs when the result is asked for, in bucket order on every rank.
      ProcessGroup* g = &group;
      return [g, buffer]() mutable {
        if (!detail::intra_node_all_reduce(*g, buffer)) g->all_reduce_async(buffer).wait();
        return buffer.div_(g->size());
      };
    }
    Request request = group.all_reduce_async(buffer);
    const int size = group.size();
    return [request, buffer, size]() mutable {
      request.wait();
      return buffer.div_(size);
    };
  }
};

// Cast, divide (before summing, so that the sum of many ranks cannot overflow), all-reduce
// in the low precision, cast back: torch's fp16/bf16_compress_hook.
class CastAllReduceHook final : public CommHook {
 public:
  explicit CastAllReduceHook(at::ScalarType dtype) : dtype_(dtype) {}
  PendingBucket start(ProcessGroup& group, GradBucket& bucket) override {
    at::Tensor compressed = bucket.buffer.to(dtype_).div_(group.size()).contiguous();
    Request request = group.all_reduce_async(compressed);
    at::Tensor buffer = bucket.buffer;
    return [request, compressed, buffer]() mutable {
      request.wait();
      return buffer.copy_(compressed);
    };
  }

 private:
  at::ScalarType dtype_;
};

// bfloat16 over Gloo, which cannot sum it: the compressed bucket's bits travel as bytes. An
// all-to-all gives each rank one chunk from everyone (a reduce-scatter's traffic); the rank
// sums its chunks in float32, rounds to bfloat16, and an all-gather of the rounded chunks
// completes the all-reduce. Bytes per rank: 2 (n-1)/n of the bfloat16 bucket, as a ring.
class Bf16GlooHook final : public CommHook {
 public:
  PendingBucket start(ProcessGroup& group, GradBucket& bucket) override {
    const int64_t n = group.size();
    const int64_t numel = bucket.buffer.numel();
    const int64_t chunk = (numel + n - 1) / n;
    at::Tensor compressed = torch::zeros({chunk * n}, bucket.buffer.options().dtype(at::kBFloat16));
    compressed.narrow(0, 0, numel).copy_(bucket.buffer.to(at::kBFloat16).div_(n));
    at::Tensor send = as_bytes(compressed);
    at::Tensor received = torch::empty_like(send);
    Request request = detail::all_to_all_equal_async(group, received, send);
    at::Tensor buffer = bucket.buffer;
    ProcessGroup* g = &group;
    return [=]() mutable {
      request.wait();
      at::Tensor parts = from_bytes(received).view({n, chunk});
      at::Tensor mine = parts.to(at::kFloat).sum(0).to(at::kBFloat16);
      auto gathered = g->all_gather(as_bytes(mine));
      at::Tensor whole = from_bytes(torch::cat(gathered));
      return buffer.copy_(whole.narrow(0, 0, numel).view_as(buffer));
    };
  }

 private:
  // bfloat16 <-> its bytes; same storage, no copy.
  static at::Tensor as_bytes(const at::Tensor& t) {
    return torch::from_blob(
        t.data_ptr(), {t.numel() * 2}, [t](void*) {}, t.options().dtype(torch::kUInt8));
  }
  static at::Tensor from_bytes(const at::Tensor& t) {
    return torch::from_blob(
        t.data_ptr(), {t.numel() / 2}, [t](void*) {}, t.options().dtype(torch::kBFloat16));
  }
};

class Bf16Hook final : public CommHook {
 public:
  PendingBucket start(ProcessGroup& group, GradBucket& bucket) override {
    return group.backend() == Backend::kNccl ? native_.start(group, bucket)
                                             : gloo_.start(group, bucket);
  }

 private:
  CastAllReduceHook native_{at::kBFloat16};
  Bf16GlooHook gloo_;
};

}  // namespace

std::shared_ptr<CommHook> make_allreduce_hook() { return std::make_shared<AllReduceHook>(); }
std::shared_ptr<CommHook> make_fp16_compress_hook() {
  return std::make_shared<CastAllReduceHook>(at::kHalf);
}
std::shared_ptr<CommHook> make_bf16_compress_hook() { return std::make_shared<Bf16Hook>(); }

}  // namespace ddp
