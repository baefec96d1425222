#include "ddp/detail/reducer.h"

#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "ddp/error.h"
#include "ddp/process_group.h"

namespace ddp::detail {
namespace {

constexpr const char* kBackwardOp = "DistributedDataParallel backward";

struct Param {
  std::string name;
  at::Tensor tensor;
  std::size_t bucket = 0;
  int64_t offset = 0;  // into the bucket's flat buffer, in elements
};

struct Bucket {
  std::vector<std::size_t> params;  // indices into ReducerState::params, in buffer order
  std::vector<std::string> names;
  at::Tensor buffer;
  std::size_t pending = 0;  // parameters of this pass not ready yet
  PendingBucket result;     // set once launched in this pass
};

// Broadcasts tensors from rank 0, one flat tensor per dtype/device to keep messages few.
void broadcast_from_primary(ProcessGroup& group, const std::vector<at::Tensor>& tensors) {
  if (group.size() == 1 || tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::map<std::tuple<int, std::string>, std::vector<at::Tensor>> by_kind;
  for (const auto& t : tensors) {
    by_kind[{static_cast<int>(t.scalar_type()), t.device().str()}].push_back(t);
  }
  for (auto& [kind, list] : by_kind) {
    std::vector<at::Tensor> flat_views;
    for (auto& t : list) flat_views.push_back(t.detach().reshape(-1));
    at::Tensor flat = torch::cat(flat_views);
    group.broadcast(flat, 0);
    int64_t offset = 0;
    for (auto& t : list) {
      t.detach().copy_(flat.narrow(0, offset, t.numel()).view_as(t));
      offset += t.numel();
    }
  }
}

}  // namespace

struct ReducerState : std::enable_shared_from_this<ReducerState> {
  std::shared_ptr<ProcessGroup> group;
  DdpOptions options;
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  std::vector<at::Tensor> buffers;
  // AccumulateGrad nodes are held weakly by their variables; keeping them here keeps our hooks.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;

  mutable std::mutex mutex;  // guards everything below; hooks may run on autograd threads
  bool sync = true;
  // The last training forward ran with sync on (or none ran yet): the next one broadcasts
  // buffers. torch DDP's require_forward_param_sync.
  bool buffers_need_sync = true;
  // Per backward pass; reset by finish_pass().
  bool pass_started = false;
  std::vector<char> ready;      // by param index: its hook fired (or, unused, it was forced)
  std::vector<char> fired;      // by param index: its hook fired in this pass
  std::size_t next_bucket = 0;  // buckets launch strictly in order, identically on all ranks
  DdpStats stats;

  void build_buckets();
  void mark_ready(std::size_t index);
  void launch_ready_buckets();
  void launch(std::size_t b);
  void finalize();
  void finish_pass();
};

namespace {

class ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::weak_ptr<ReducerState> state, std::size_t index)
      : state_(std::move(state)), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    // A reducer destroyed before its module leaves these hooks behind as no-ops.
    if (auto state = state_.lock()) state->mark_ready(index_);
    return outputs;
  }

 private:
  std::weak_ptr<ReducerState> state_;
  std::size_t index_;
};

}  // namespace

void ReducerState::build_buckets() {
  // Reverse registration order approximates the order in which backward produces gradients.
  struct Open {
    std::size_t bucket;
    std::size_t bytes;
    std::size_t cap;
  };
  std::map<std::tuple<int, std::string>, Open> open;  // one filling bucket per dtype/device
  std::map<std::tuple<int, std::string>, int> created;
  for (std::size_t i = params.size(); i-- > 0;) {
    const at::Tensor& t = params[i].tensor;
    auto kind = std::make_tuple(static_cast<int>(t.scalar_type()), t.device().str());
    const std::size_t bytes = t.numel() * t.element_size();
    auto it = open.find(kind);
    if (it == open.end()) {
      buckets.emplace_back();
      const std::size_t cap =
          created[kind]++ == 0 ? options.first_bucket_cap_bytes : options.bucket_cap_bytes;
      it = open.emplace(kind, Open{buckets.size() - 1, 0, cap}).first;
    }
    Bucket& bucket = buckets[it->second.bucket];
    params[i].bucket = it->second.bucket;
    params[i].offset = 0;
    for (auto p : bucket.params) params[i].offset += params[p].tensor.numel();
    bucket.params.push_back(i);
    bucket.names.push_back(params[i].name);
    // A bucket closes once it reaches its cap, the parameter that crossed it included (as
    // PyTorch does): a large layer then shares the early bucket instead of delaying the next.
    it->second.bytes += bytes;
    if (it->second.bytes >= it->second.cap) open.erase(it);
  }
  for (auto& bucket : buckets) {
    int64_t numel = 0;
    for (auto p : bucket.params) numel += params[p].tensor.numel();
    bucket.buffer =
        torch::zeros({numel}, params[bucket.params.front()].tensor.options().requires_grad(false));
    bucket.pending = bucket.params.size();
  }
  ready.assign(params.size(), 0);
  fired.assign(params.size(), 0);
  stats.bucket_count = buckets.size();
}

void ReducerState::mark_ready(std::size_t index) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!sync) return;  // no_sync(): gradients accumulate locally
  if (!pass_started) {
    pass_started = true;
    std::weak_ptr<ReducerState> weak = shared_from_this();
    torch::autograd::Engine::get_default_engine().queue_callback([weak] {
      if (auto state = weak.lock()) state->finalize();
    });
  }
  if (ready[index]) {
    throw Error(group->global_rank(), kBackwardOp,
                "parameter '" + params[index].name +
                    "' received its gradient twice in one backward pass; a second backward "
                    "through the same graph (retain_graph) needs no_sync() around the first");
  }
  ready[index] = 1;
  fired[index] = 1;
  if (--buckets[params[index].bucket].pending == 0) launch_ready_buckets();
}

void ReducerState::launch_ready_buckets() {
  while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) {
    launch(next_bucket++);
  }
}

void ReducerState::launch(std::size_t b) {
  torch::NoGradGuard no_grad;
  Bucket& bucket = buckets[b];
  for (auto p : bucket.params) {
    const at::Tensor& grad = params[p].tensor.grad();
    at::Tensor slot = bucket.buffer.narrow(0, params[p].offset, params[p].tensor.numel());
    if (grad.defined()) {
      if (grad.is_sparse()) {
        throw Error(group->global_rank(), kBackwardOp,
                    "parameter '" + params[p].name + "' has a sparse gradient (unsupported)");
      }
      slot.copy_(grad.reshape(-1));
    } else {
      slot.zero_();
    }
  }
  GradBucket view;
  view.index = static_cast<int>(b);
  view.buffer = bucket.buffer;
  view.parameter_names = bucket.names;
  view.is_last = b + 1 == buckets.size();
  bucket.result = options.comm_hook->start(*group, view);
}

void ReducerState::finalize() {
  std::lock_guard<std::mutex> lock(mutex);
  try {
    torch::NoGradGuard no_grad;
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (ready[i]) continue;
      if (!options.find_unused_parameters) {
        missing.push_back(params[i].name);
        continue;
      }
      ready[i] = 1;
      --buckets[params[i].bucket].pending;
    }
    if (!missing.empty()) {
      std::string names;
      for (const auto& n : missing) names += (names.empty() ? "" : ", ") + n;
      throw Error(group->global_rank(), kBackwardOp,
                  "parameters without a gradient in this backward pass: " + names +
                      ". Set DdpOptions::find_unused_parameters, or list parameters that are "
                      "never used in DdpOptions::unused_parameters");
    }
    launch_ready_buckets();
    // Which parameters had a gradient on some rank: those unused everywhere keep theirs.
    at::Tensor used_anywhere;
    if (options.find_unused_parameters) {
      used_anywhere = torch::zeros({static_cast<int64_t>(params.size())}, torch::kInt);
      auto acc = used_anywhere.accessor<int, 1>();
      for (std::size_t i = 0; i < params.size(); ++i) {
        acc[i] = fired[i] || params[i].tensor.grad().defined() ? 1 : 0;
      }
      group->all_reduce(used_anywhere);
    }
    const auto wait_start = std::chrono::steady_clock::now();
    std::vector<at::Tensor> results;
    for (auto& bucket : buckets) results.push_back(bucket.result());
    stats.comm_wait += std::chrono::steady_clock::now() - wait_start;
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      for (auto p : buckets[b].params) {
        at::Tensor& param = params[p].tensor;
        at::Tensor averaged = results[b].narrow(0, params[p].offset, param.numel()).view_as(param);
        if (param.grad().defined()) {
          param.mutable_grad().copy_(averaged);
        } else if (!used_anywhere.defined() || used_anywhere[p].item<int>() > 0) {
          param.mutable_grad() = averaged.clone();
        }
      }
    }
    ++stats.synced_iterations;
  } catch (const Error&) {
    finish_pass();
    throw;
  } catch (const std::exception& e) {
    finish_pass();
    throw Error(group->global_rank(), kBackwardOp, e.what());
  }
  finish_pass();
}

void ReducerState::finish_pass() {
  pass_started = false;
  next_bucket = 0;
  std::fill(ready.begin(), ready.end(), 0);
  std::fill(fired.begin(), fired.end(), 0);
  for (auto& bucket : buckets) {
    bucket.pending = bucket.params.size();
    bucket.result = nullptr;
  }
}

Reducer::Reducer(std::shared_ptr<ProcessGroup> group,
                 std::vector<std::pair<std::string, at::Tensor>> params,
                 std::vector<at::Tensor> buffers, DdpOptions options)
    : state_(std::make_shared<ReducerState>()) {
  if (!group) throw Error(-1, "DistributedDataParallel", "the process group is null");
  state_->group = std::move(group);
  if (!options.comm_hook) options.comm_hook = make_allreduce_hook();
  const std::set<std::string> declared_unused(options.unused_parameters.begin(),
                                              options.unused_parameters.end());
  std::set<const void*> seen;  // a parameter shared between submodules is reduced once
  std::vector<at::Tensor> to_broadcast;
  for (auto& [name, tensor] : params) {
    if (!seen.insert(tensor.unsafeGetTensorImpl()).second) continue;
    to_broadcast.push_back(tensor);
    if (!tensor.requires_grad() || declared_unused.count(name)) continue;
    state_->params.push_back(Param{name, tensor, 0, 0});
  }
  state_->options = std::move(options);
  state_->buffers = std::move(buffers);
  for (auto& b : state_->buffers) to_broadcast.push_back(b);
  broadcast_from_primary(*state_->group, to_broadcast);
  if (state_->params.empty()) return;
  state_->build_buckets();
  for (std::size_t i = 0; i < state_->params.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(state_->params[i].tensor);
    accumulator->add_post_hook(std::make_unique<ReadyHook>(state_, i));
    state_->accumulators.push_back(std::move(accumulator));
  }
}

Reducer::~Reducer() = default;

void Reducer::before_forward(bool training) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!training || !torch::GradMode::is_enabled()) return;
  if (state_->options.broadcast_buffers && state_->buffers_need_sync) {
    broadcast_from_primary(*state_->group, state_->buffers);
  }
  state_->buffers_need_sync = state_->sync;
}

void Reducer::set_sync(bool sync) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->sync = sync;
}

bool Reducer::sync() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->sync;
}

DdpStats Reducer::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

ProcessGroup& Reducer::group() { return *state_->group; }

}  // namespace ddp::detail
