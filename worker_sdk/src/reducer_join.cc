// Uneven inputs: the join protocol (PyTorch's Join for DDP).
//
// While a join() loop runs, every training forward that will communicate first all-reduces
// an announcement: a one-hot "still training" vector plus flags for "buffers will be
// broadcast" and "this iteration synchronises gradients". A rank whose loop has ended keeps
// all-reducing zeros; from the sum it learns how many ranks still train and which
// collectives they are about to issue, and issues the same ones (zero gradients) in the
// same order (see the order listed in reducer.h). When the sum is zero every rank has
// finished; all then take the model of the last rank that trained.
#include <algorithm>

#include <torch/torch.h>

#include "ddp/heartbeat.h"
#include "reducer.h"

namespace ddp::detail {

void Reducer::announce(bool active, bool will_broadcast, bool will_sync,
                       std::vector<int>* flags_out) {
  const int n = group_->size();
  at::Tensor flags = torch::zeros({n + 2}, torch::kInt);
  if (active) {
    flags[group_->rank()] = 1;
    flags[n] = will_broadcast ? 1 : 0;
    flags[n + 1] = will_sync ? 1 : 0;
  }
  flags = flags.to(group_->device());
  group_->all_reduce(flags);
  flags = flags.cpu();
  auto acc = flags.accessor<int, 1>();
  for (int r = n - 1; r >= 0; --r) {
    if (acc[r] > 0) {
      authoritative_rank_ = r;
      break;
    }
  }
  if (flags_out != nullptr) flags_out->assign(acc.data(), acc.data() + n + 2);
}

void Reducer::begin_join() {
  std::lock_guard<std::mutex> lock(mutex_);
  join_active_ = true;
}

void Reducer::abandon_join() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  join_active_ = false;
}

void Reducer::finish_join() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!join_active_) return;
  join_active_ = false;  // also when a collective below throws
  const int n = group_->size();
  std::vector<int> flags;
  for (;;) {
    announce(/*active=*/false, false, false, &flags);
    const auto training =
        std::count_if(flags.begin(), flags.begin() + n, [](int f) { return f > 0; });
    if (training == 0) break;
    if (flags[n] > 0) broadcast_state(buffers_, authoritative_rank_);
    if (flags[n + 1] > 0) {
      shadow_backward();
      ++stats_.shadowed_iterations;
      heartbeat();  // alive, though not stepping
    }
  }
  // The ranks that ran out first stopped updating their weights: everyone takes the model
  // of the last rank that trained.
  std::vector<at::Tensor> state;
  for (const auto& p : params_) state.push_back(p.tensor);
  for (const auto& b : buffers_) state.push_back(b);
  broadcast_state(state, authoritative_rank_);
  buffers_need_sync_ = true;
  authoritative_rank_ = 0;
}

// The collectives of one synchronised backward pass, with zero gradients from this rank.
void Reducer::shadow_backward() {
  torch::NoGradGuard no_grad;
  std::vector<PendingBucket> pending;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].buffer.zero_();
    GradBucket view = bucket_view(b);
    pending.push_back(options_.comm_hook->start(*group_, view));
  }
  if (detects_unused()) {
    at::Tensor none_used = torch::zeros({static_cast<int64_t>(params_.size())},
                                        torch::TensorOptions(torch::kInt).device(group_->device()));
    group_->all_reduce(none_used);
    none_used = none_used.cpu();
    if (options_.static_graph && !first_pass_done_) {
      static_used_anywhere_ = none_used;
      statically_unused_.assign(params_.size(), 1);
    }
  }
  for (auto& result : pending) result();
  end_of_first_pass();
}

}  // namespace ddp::detail
