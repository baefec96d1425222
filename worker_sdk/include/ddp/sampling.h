// Distributed sampling: LibTorch's own samplers, plus resuming them at an exact position.
//
// torch::data::samplers::DistributedRandomSampler and DistributedSequentialSampler give each
// rank its own shard of the dataset; set_epoch(e) makes the random one reshuffle per epoch,
// identically on every rank. The SDK adds no second implementation, only seek(), which puts a
// sampler where a snapshot left it (same epoch, same number of batches already drawn).
#pragma once

#include <cstddef>

#include <torch/data/samplers/distributed.h>

namespace ddp {

using torch::data::samplers::DistributedRandomSampler;
using torch::data::samplers::DistributedSequentialSampler;

// Sets the epoch, resets the sampler, and draws `batches_done` batches of `batch_size`
// indices, discarding them: the next next(batch_size) returns the batch that an uninterrupted
// run would draw at this point. Cost: index arithmetic only, no data is loaded.
template <class Sampler>
void seek(Sampler& sampler, std::size_t epoch, std::size_t batches_done, std::size_t batch_size) {
  sampler.set_epoch(epoch);
  sampler.reset();
  for (std::size_t i = 0; i < batches_done; ++i) {
    if (!sampler.next(batch_size)) break;
  }
}

}  // namespace ddp
