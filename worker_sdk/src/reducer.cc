#include "reducer.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "bucket_layout.h"
#include "ddp/error.h"
#include "ddp/heartbeat.h"

namespace ddp::detail {
namespace {

constexpr const char* kBackwardOp = "DistributedDataParallel backward";

class ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::weak_ptr<Reducer> reducer, std::size_t index)
      : reducer_(std::move(reducer)), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    // A reducer destroyed before its module leaves these hooks behind as no-ops.
    if (auto reducer = reducer_.lock()) reducer->mark_ready(index_);
    return outputs;
  }

 private:
  std::weak_ptr<Reducer> reducer_;
  std::size_t index_;
};

// A tensor sharing `buffer`'s storage at `offset` elements, with `sizes`. Made with set_()
// rather than narrow(): an autograd view cannot be detach_()ed, which LibTorch's
// Optimizer::zero_grad() does to every gradient.
at::Tensor storage_view(const at::Tensor& buffer, int64_t offset, at::IntArrayRef sizes) {
  at::Tensor view = at::empty({0}, buffer.options());
  view.set_(buffer.storage(), buffer.storage_offset() + offset, sizes,
            c10::contiguous_strides(sizes));
  return view;
}

bool aliases(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes();
}

std::string kind_of(const at::Tensor& t) {
  return std::to_string(static_cast<int>(t.scalar_type())) + "@" + t.device().str();
}

}  // namespace

Reducer::Reducer(std::shared_ptr<ProcessGroup> group, DdpOptions options)
    : group_(std::move(group)), options_(std::move(options)) {}

Reducer::~Reducer() = default;

std::shared_ptr<Reducer> Reducer::create(std::shared_ptr<ProcessGroup> group,
                                         std::vector<std::pair<std::string, at::Tensor>> params,
                                         std::vector<at::Tensor> buffers, DdpOptions options) {
  if (!group) throw Error(-1, "DistributedDataParallel", "the process group is null");
  if (!options.comm_hook) options.comm_hook = make_allreduce_hook();
  std::shared_ptr<Reducer> r(new Reducer(std::move(group), std::move(options)));
  const std::set<std::string> declared_unused(r->options_.unused_parameters.begin(),
                                              r->options_.unused_parameters.end());
  std::set<const void*> seen;  // a parameter shared between submodules is reduced once
  std::vector<at::Tensor> to_broadcast;
  for (auto& [name, tensor] : params) {
    if (!seen.insert(tensor.unsafeGetTensorImpl()).second) continue;
    to_broadcast.push_back(tensor);
    if (!tensor.requires_grad() || declared_unused.count(name)) continue;
    r->params_.push_back(Param{name, tensor, 0, 0});
  }
  r->buffers_ = std::move(buffers);
  for (auto& b : r->buffers_) to_broadcast.push_back(b);
  r->broadcast_state(to_broadcast, 0);
  if (r->params_.empty()) return r;
  r->build_buckets(reverse_registration_order(r->params_.size()));
  for (std::size_t i = 0; i < r->params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(r->params_[i].tensor);
    accumulator->add_post_hook(std::make_unique<ReadyHook>(r, i));
    r->accumulators_.push_back(std::move(accumulator));
  }
  return r;
}

// Broadcasts tensors from `root` as one message per device: their bytes, whatever their
// dtypes (BatchNorm's float statistics and int64 counters travel together, one collective
// per forward instead of one per dtype).
void Reducer::broadcast_state(const std::vector<at::Tensor>& tensors, int root) {
  if (group_->size() == 1 || tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::map<std::string, std::vector<at::Tensor>> by_device;
  for (const auto& t : tensors) by_device[t.device().str()].push_back(t);
  for (auto& [device, list] : by_device) {
    std::vector<at::Tensor> contiguous;
    std::vector<at::Tensor> bytes;  // byte views of the contiguous tensors
    for (auto& t : list) {
      contiguous.push_back(t.detach().contiguous());
      const at::Tensor& c = contiguous.back();
      bytes.push_back(torch::from_blob(
          c.data_ptr(), {c.numel() * c.element_size()}, [c](void*) {},
          c.options().dtype(torch::kUInt8)));
    }
    at::Tensor flat = torch::cat(bytes);
    group_->broadcast(flat, root);
    int64_t offset = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
      bytes[i].copy_(flat.narrow(0, offset, bytes[i].numel()));
      offset += bytes[i].numel();
      // A non-contiguous tensor got a contiguous copy above: write the values back.
      if (contiguous[i].data_ptr() != list[i].data_ptr()) list[i].detach().copy_(contiguous[i]);
    }
  }
}

void Reducer::build_buckets(const std::vector<std::size_t>& order) {
  torch::NoGradGuard no_grad;
  std::vector<BucketParam> sizes;
  for (const auto& p : params_) {
    sizes.push_back(
        {static_cast<std::size_t>(p.tensor.numel()) * p.tensor.element_size(), kind_of(p.tensor)});
  }
  const auto layout =
      assign_buckets(sizes, order, options_.first_bucket_cap_bytes, options_.bucket_cap_bytes);
  std::vector<Bucket> buckets(layout.size());
  for (std::size_t b = 0; b < layout.size(); ++b) {
    Bucket& bucket = buckets[b];
    bucket.params = layout[b];
    int64_t numel = 0;
    for (auto p : bucket.params) numel += params_[p].tensor.numel();
    bucket.buffer =
        torch::zeros({numel}, params_[bucket.params.front()].tensor.options().requires_grad(false));
    int64_t offset = 0;
    for (std::size_t k = 0; k < bucket.params.size(); ++k) {
      Param& p = params_[bucket.params[k]];
      p.bucket = b;
      p.slot = k;
      bucket.names.push_back(p.name);
      bucket.views.push_back(storage_view(bucket.buffer, offset, p.tensor.sizes()));
      offset += p.tensor.numel();
    }
    bucket.pending = bucket.params.size();
  }
  if (options_.gradient_as_bucket_view) {
    // Gradients become the new buckets' slots, keeping their values (zero when undefined).
    for (auto& p : params_) {
      at::Tensor& view = buckets[p.bucket].views[p.slot];
      if (p.tensor.grad().defined()) view.copy_(p.tensor.grad());
      p.tensor.mutable_grad() = view;
    }
  }
  buckets_ = std::move(buckets);
  ready_.assign(params_.size(), 0);
  fired_.assign(params_.size(), 0);
  stats_.bucket_count = buckets_.size();
}

bool Reducer::detects_unused() const {
  return options_.find_unused_parameters || (options_.static_graph && !first_pass_done_);
}

void Reducer::start_pass() {
  pass_started_ = true;
  std::weak_ptr<Reducer> weak = shared_from_this();
  torch::autograd::Engine::get_default_engine().queue_callback([weak] {
    if (auto reducer = weak.lock()) reducer->finalize();
  });
  if (options_.static_graph && first_pass_done_) {
    // Known to get no gradient: ready from the start, so their buckets need not wait.
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (!statically_unused_[i]) continue;
      ready_[i] = 1;
      --buckets_[params_[i].bucket].pending;
    }
  }
}

void Reducer::mark_ready(std::size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!sync_) return;  // no_sync(): gradients accumulate locally
  if (!pass_started_) start_pass();
  if (ready_[index]) {
    const bool static_change =
        options_.static_graph && first_pass_done_ && statically_unused_[index] && !fired_[index];
    throw Error(group_->global_rank(), kBackwardOp,
                static_change
                    ? "static_graph: parameter '" + params_[index].name +
                          "' got a gradient although it had none in the first iteration: the "
                          "graph is not static (turn DdpOptions::static_graph off)"
                    : "parameter '" + params_[index].name +
                          "' received its gradient twice in one backward pass; a second "
                          "backward through the same graph (retain_graph) needs no_sync() "
                          "around the first");
  }
  ready_[index] = 1;
  fired_[index] = 1;
  if (!first_pass_done_) ready_order_.push_back(index);
  if (--buckets_[params_[index].bucket].pending == 0) launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    launch(next_bucket_++);
  }
}

GradBucket Reducer::bucket_view(std::size_t b) const {
  const Bucket& bucket = buckets_[b];
  GradBucket view;
  view.index = static_cast<int>(b);
  view.buffer = bucket.buffer;
  view.gradients = bucket.views;
  view.parameter_names = bucket.names;
  view.is_last = b + 1 == buckets_.size();
  return view;
}

void Reducer::launch(std::size_t b) {
  torch::NoGradGuard no_grad;
  // Entering this step's collectives. A rank stuck before its collective keeps its previous
  // step while the ranks waiting for it report this one: the launcher names it as the rank
  // that stopped first (hang detection).
  if (b == 0) {
    const std::int64_t step =
        step_offset_ + static_cast<std::int64_t>(stats_.synced_iterations) + 1;
    if (synced_at_) {  // busy since the previous pass's synchronisation ended (stragglers)
      heartbeat(
          step,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - *synced_at_).count());
    } else {
      heartbeat(step);
    }
  }
  Bucket& bucket = buckets_[b];
  for (std::size_t k = 0; k < bucket.params.size(); ++k) {
    const Param& p = params_[bucket.params[k]];
    const at::Tensor& grad = p.tensor.grad();
    at::Tensor& slot = bucket.views[k];
    if (!grad.defined()) {
      slot.zero_();
    } else if (grad.is_sparse()) {
      throw Error(group_->global_rank(), kBackwardOp,
                  "parameter '" + p.name + "' has a sparse gradient (unsupported)");
    } else if (!aliases(grad, slot)) {
      slot.copy_(grad);  // gradient_as_bucket_view makes this copy unnecessary
    }
  }
  GradBucket view = bucket_view(b);
  bucket.result = options_.comm_hook->start(*group_, view);
}

// Which parameters had a gradient on some rank: those unused everywhere keep theirs.
at::Tensor Reducer::used_anywhere_this_pass() {
  if (options_.static_graph && first_pass_done_) return static_used_anywhere_;
  if (!detects_unused()) return {};
  at::Tensor used = torch::zeros({static_cast<int64_t>(params_.size())}, torch::kInt);
  auto acc = used.accessor<int, 1>();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    acc[i] = fired_[i] || params_[i].tensor.grad().defined() ? 1 : 0;
  }
  used = used.to(group_->device());
  group_->all_reduce(used);
  return used.cpu();
}

void Reducer::finalize() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    torch::NoGradGuard no_grad;
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (ready_[i]) continue;
      if (!detects_unused()) {
        missing.push_back(params_[i].name);
        continue;
      }
      ready_[i] = 1;
      --buckets_[params_[i].bucket].pending;
    }
    if (!missing.empty()) {
      std::string names;
      for (const auto& n : missing) names += (names.empty() ? "" : ", ") + n;
      throw Error(group_->global_rank(), kBackwardOp,
                  "parameters without a gradient in this backward pass: " + names +
                      (options_.static_graph
                           ? ". They had one in the first iteration: the graph is not static "
                             "(turn DdpOptions::static_graph off)"
                           : ". Set DdpOptions::find_unused_parameters, or list parameters "
                             "that are never used in DdpOptions::unused_parameters"));
    }
    launch_ready_buckets();
    const at::Tensor used_anywhere = used_anywhere_this_pass();
    const auto wait_start = std::chrono::steady_clock::now();
    std::vector<at::Tensor> results;
    for (auto& bucket : buckets_) results.push_back(bucket.result());
    stats_.comm_wait += std::chrono::steady_clock::now() - wait_start;
    write_back(results, used_anywhere);
    ++stats_.synced_iterations;
    synced_at_ = std::chrono::steady_clock::now();
    if (options_.static_graph && !first_pass_done_) {
      static_used_anywhere_ = used_anywhere;
      statically_unused_.assign(params_.size(), 0);
      for (std::size_t i = 0; i < params_.size(); ++i) statically_unused_[i] = !fired_[i];
    }
    end_of_first_pass();
  } catch (const Error&) {
    finish_pass();
    throw;
  } catch (const std::exception& e) {
    finish_pass();
    throw Error(group_->global_rank(), kBackwardOp, e.what());
  }
  finish_pass();
}

void Reducer::write_back(const std::vector<at::Tensor>& results, const at::Tensor& used_anywhere) {
  auto used = [&](std::size_t p) {
    return !used_anywhere.defined() || used_anywhere[static_cast<int64_t>(p)].item<int>() > 0;
  };
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    const bool in_place = results[b].data_ptr() == bucket.buffer.data_ptr();
    if (options_.gradient_as_bucket_view) {
      if (!in_place) bucket.buffer.copy_(results[b]);
      for (std::size_t k = 0; k < bucket.params.size(); ++k) {
        at::Tensor& param = params_[bucket.params[k]].tensor;
        if (!aliases(param.grad(), bucket.views[k]) && used(bucket.params[k])) {
          param.mutable_grad() = bucket.views[k];
        }
      }
      continue;
    }
    int64_t offset = 0;
    for (std::size_t p : bucket.params) {
      at::Tensor& param = params_[p].tensor;
      at::Tensor averaged = results[b].narrow(0, offset, param.numel()).view_as(param);
      offset += param.numel();
      if (param.grad().defined()) {
        param.mutable_grad().copy_(averaged);
      } else if (used(p)) {
        param.mutable_grad() = averaged.clone();
      }
    }
  }
}

// After the first synchronised pass (real or shadowed): buckets follow the ready order.
void Reducer::end_of_first_pass() {
  if (first_pass_done_) return;
  first_pass_done_ = true;
  // As PyTorch: with find_unused_parameters (and no static graph) the ready order may change
  // from one iteration to the next, so the buckets stay as they are.
  if (options_.find_unused_parameters && !options_.static_graph) {
    ready_order_.clear();
    return;
  }
  rebuild_buckets();
}

void Reducer::rebuild_buckets() {
  torch::NoGradGuard no_grad;
  // Every rank must build the same buckets: take the authoritative rank's order.
  const auto local = complete_order(ready_order_, params_.size());
  at::Tensor order = torch::empty({static_cast<int64_t>(local.size())}, torch::kLong);
  for (std::size_t i = 0; i < local.size(); ++i) order[static_cast<int64_t>(i)] = int64_t(local[i]);
  if (group_->size() > 1) {
    order = order.to(group_->device());
    group_->broadcast(order, authoritative_rank_);
    order = order.cpu();
  }
  std::vector<std::size_t> agreed(local.size());
  for (std::size_t i = 0; i < agreed.size(); ++i) {
    agreed[i] = static_cast<std::size_t>(order[static_cast<int64_t>(i)].item<int64_t>());
  }
  ready_order_.clear();
  ready_order_.shrink_to_fit();
  if (agreed == reverse_registration_order(params_.size())) {
    stats_.buckets_rebuilt = true;  // the initial guess was right: same buckets
    return;
  }
  // With gradient_as_bucket_view the averaged gradients live in the old buckets; the new
  // buckets take them over in build_buckets().
  build_buckets(agreed);
  stats_.buckets_rebuilt = true;
}

void Reducer::finish_pass() {
  pass_started_ = false;
  next_bucket_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(fired_.begin(), fired_.end(), 0);
  if (!first_pass_done_) ready_order_.clear();  // a failed first pass records nothing
  for (auto& bucket : buckets_) {
    bucket.pending = bucket.params.size();
    bucket.result = nullptr;
  }
}

void Reducer::before_forward(bool training) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!training || !torch::GradMode::is_enabled()) return;
  const bool broadcast = options_.broadcast_buffers && buffers_need_sync_ && !buffers_.empty();
  if (join_active_ && (broadcast || sync_)) announce(/*active=*/true, broadcast, sync_, nullptr);
  if (broadcast) broadcast_state(buffers_, authoritative_rank_);
  buffers_need_sync_ = sync_;
}

void Reducer::set_sync(bool sync) {
  std::lock_guard<std::mutex> lock(mutex_);
  sync_ = sync;
}

bool Reducer::sync() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sync_;
}

DdpStats Reducer::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Reducer::set_step_offset(std::int64_t steps) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_offset_ = steps;
}

std::vector<std::vector<std::string>> Reducer::bucket_parameter_names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::vector<std::string>> out;
  for (const auto& bucket : buckets_) out.push_back(bucket.names);
  return out;
}

}  // namespace ddp::detail
