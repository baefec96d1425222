// Options and counters of ddp::DistributedDataParallel (see distributed_data_parallel.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ddp/comm_hooks.h"

namespace ddp {

struct DdpOptions {
  // Bucket size cap for all buckets but the first: a bucket closes once its parameters reach
  // it (the parameter crossing it included). PyTorch's default (25 MiB).
  std::size_t bucket_cap_bytes = 25u << 20;
  // Cap of the first bucket (the parameters whose gradients are ready first), so that
  // communication starts soon after backward begins. PyTorch's default (1 MiB).
  std::size_t first_bucket_cap_bytes = 1u << 20;
  // Broadcast buffers (e.g. BatchNorm running stats) from rank 0 before each training forward
  // that follows a synchronised one (as torch DDP does: the forwards after a no_sync() forward
  // skip it, so gradient accumulation pays one broadcast per synchronised step).
  bool broadcast_buffers = true;
  // Parameters that may get no gradient in some iterations on some ranks: they are treated
  // as zero at the end of backward, and a parameter unused on every rank keeps its gradient
  // untouched. Costs one extra small all-reduce per iteration and delays the buckets holding
  // such parameters until the end of backward.
  bool find_unused_parameters = false;
  // Names (as in named_parameters()) of parameters that are never used in training: they are
  // left out of the buckets entirely, at no cost.
  std::vector<std::string> unused_parameters;
  // Each parameter's .grad() is a view into its bucket's flat buffer: backward accumulates
  // straight into the bucket and the average is written in place, so neither the copy into
  // the bucket nor the copy back happens (PyTorch's gradient_as_bucket_view). Gradients stay
  // views as long as the program zeroes them in place (LibTorch 1.13's zero_grad() does);
  // a gradient set to undefined is copied once and made a view again. Default off, as in
  // PyTorch.
  bool gradient_as_bucket_view = false;
  // The set of parameters that get a gradient, and the order in which they do, is the same
  // in every iteration (PyTorch's static_graph). The first synchronised iteration then finds
  // unused parameters like find_unused_parameters; later ones reuse what it found (no extra
  // all-reduce, and buckets do not wait for parameters known to be unused). A parameter whose
  // gradient appears or disappears later is a ddp::Error naming it. Default off.
  bool static_graph = false;
  // How a bucket is averaged across ranks; nullptr means make_allreduce_hook().
  std::shared_ptr<CommHook> comm_hook;
};

// Counters for benchmarks and tests; read between iterations.
struct DdpStats {
  std::size_t bucket_count = 0;
  // Synchronised backward passes run by this process (the heartbeat's step, minus offset).
  std::size_t synced_iterations = 0;
  // Time spent in the final callback waiting for communication that backward did not hide.
  std::chrono::nanoseconds comm_wait{0};
  // True once the buckets were rebuilt in the order gradients became ready (after the first
  // synchronised iteration).
  bool buckets_rebuilt = false;
  // Iterations of the other ranks that this rank shadowed after its data ran out (join).
  std::size_t shadowed_iterations = 0;
};

}  // namespace ddp
