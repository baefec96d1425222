// Which parameters share a gradient bucket: a pure function of sizes and order, the same on
// every rank (so buckets line up across the group). LibTorch-free; unit-tested on plain values.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ddp::detail {

struct BucketParam {
  std::size_t bytes = 0;  // gradient size
  std::string kind;       // dtype and device: only parameters of one kind share a bucket
};

// Buckets for `params` taken in `order` (indices into params, the order in which gradients
// are expected to become ready). Each kind fills its own buckets; a bucket closes once its
// bytes reach its cap, the parameter crossing it included (as PyTorch does, so a large layer
// shares the early bucket instead of delaying the next). The first bucket of each kind is
// capped at first_cap, the others at cap. Returns parameter indices per bucket, in buffer
// order; buckets are numbered in the order they were opened.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<BucketParam>& params,
                                                     const std::vector<std::size_t>& order,
                                                     std::size_t first_cap, std::size_t cap);

// The bucketing order before anything is known: reverse registration order, which is
// roughly the order in which backward produces gradients.
std::vector<std::size_t> reverse_registration_order(std::size_t count);

// A complete order from the indices seen ready in one pass (first occurrence wins; indices
// out of range ignored), followed by the unseen ones in reverse registration order.
std::vector<std::size_t> complete_order(const std::vector<std::size_t>& ready, std::size_t count);

}  // namespace ddp::detail
