#include "ddp/process_group.h"

#include <algorithm>
#include <utility>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "ddp/error.h"
#include "detail/torch_compat.h"

namespace ddp {
namespace detail {

// Everything a group needs; owned by its ProcessGroup (and shared with in-flight Requests).
struct GroupState {
  LaunchEnv env;
  InitOptions options;
  Backend backend = Backend::kGloo;
  compat::StorePtr store;  // the job's store, already prefixed with the attempt
  c10::intrusive_ptr<compat::BackendBase> pg;
  int rank = 0;         // within this group
  int size = 1;         // of this group
  int global_rank = 0;  // in the job
  // Sub-groups created so far from this group; identical on every member because new_group
  // is collective, so it names the sub-group's store prefix consistently.
  int subgroups_created = 0;
  std::string name = "default";
};

struct PendingWork {
  compat::WorkPtr work;
  int rank = 0;
  std::string operation;
};

}  // namespace detail

namespace {

using detail::GroupState;
namespace compat = detail::compat;

// c10::Error's what() carries a C++ backtrace; users need the message only.
std::string describe(const std::exception& e) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

// Runs one backend call, turning any failure into a ddp::Error naming rank and operation.
template <class F>
auto guarded(int rank, const std::string& operation, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(rank, operation, describe(e));
  }
}

void check_tensor(const GroupState& s, const std::string& op, const at::Tensor& t) {
  if (!t.defined()) throw Error(s.global_rank, op, "the tensor is undefined");
  if (t.is_sparse()) throw Error(s.global_rank, op, "sparse tensors are not supported");
  if (!t.is_contiguous()) {
    throw Error(s.global_rank, op, "the tensor is not contiguous: call .contiguous() first");
  }
}

void check_peer(const GroupState& s, const std::string& op, int peer) {
  if (peer < 0 || peer >= s.size) {
    throw Error(s.global_rank, op,
                "peer rank " + std::to_string(peer) + " is outside the group of size " +
                    std::to_string(s.size));
  }
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // summed, then divided: Gloo has no AVG
      return c10d::ReduceOp::SUM;
    case ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
    case ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
    case ReduceOp::kProduct:
      return c10d::ReduceOp::PRODUCT;
  }
  return c10d::ReduceOp::SUM;
}

void wait_work(const compat::WorkPtr& work) { work->wait(); }

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

Backend resolve_backend(const InitOptions& options, int rank) {
  switch (options.backend) {
    case Backend::kGloo:
      return Backend::kGloo;
    case Backend::kNccl:
      if (!nccl_available()) {
        throw Error(rank, "init_process_group",
                    "Backend::kNccl requested, but this SDK was built without NCCL "
                    "(Debian's LibTorch has none): use Backend::kGloo or a CUDA LibTorch");
      }
      return Backend::kNccl;
    case Backend::kAuto:
      return nccl_available() && torch::cuda::is_available() ? Backend::kNccl : Backend::kGloo;
  }
  return Backend::kGloo;
}

c10::intrusive_ptr<detail::compat::BackendBase> make_backend(Backend backend,
                                                             const compat::StorePtr& store,
                                                             int rank, int size,
                                                             const GroupState& parent) {
#if defined(DDP_WITH_NCCL)
  if (backend == Backend::kNccl) {
    return compat::make_nccl(store, rank, size, parent.options.timeout);
  }
#endif
  // A job whose ranks all live on this node (every ddprun --standalone job) talks over
  // loopback; otherwise Gloo binds the host's address like torch.distributed does.
  const bool single_node = parent.env.local_world_size == parent.env.world_size;
  const std::string hostname =
      single_node || is_loopback(parent.env.master_addr) ? "127.0.0.1" : "";
  return compat::make_gloo(store, rank, size, parent.options.timeout, hostname,
                           env_or_empty("GLOO_SOCKET_IFNAME"));
}

}  // namespace

// ---------------------------------------------------------------- Request

void Request::wait() {
  if (!work_) return;
  guarded(work_->rank, work_->operation, [&] { wait_work(work_->work); });
}

bool Request::is_completed() const { return !work_ || work_->work->isCompleted(); }

// ---------------------------------------------------------------- ProcessGroup

ProcessGroup::ProcessGroup(std::shared_ptr<detail::GroupState> state) : state_(std::move(state)) {}
ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::rank() const { return state_->rank; }
int ProcessGroup::size() const { return state_->size; }
int ProcessGroup::global_rank() const { return state_->global_rank; }
Backend ProcessGroup::backend() const { return state_->backend; }
const LaunchEnv& ProcessGroup::launch_env() const { return state_->env; }

void ProcessGroup::all_reduce(at::Tensor& tensor, ReduceOp op) {
  const std::string name = "all_reduce";
  check_tensor(*state_, name, tensor);
  if (op == ReduceOp::kAvg && !at::isFloatingType(tensor.scalar_type())) {
    throw Error(state_->global_rank, name, "ReduceOp::kAvg needs a floating-point tensor");
  }
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions opts;
    opts.reduceOp = to_c10d(op);
    wait_work(state_->pg->allreduce(tensors, opts));
  });
  if (op == ReduceOp::kAvg) tensor.div_(state_->size);
}

Request ProcessGroup::all_reduce_async(at::Tensor& tensor) {
  const std::string name = "all_reduce_async";
  check_tensor(*state_, name, tensor);
  auto pending = std::make_shared<detail::PendingWork>();
  pending->rank = state_->global_rank;
  pending->operation = name;
  pending->work = guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    return state_->pg->allreduce(tensors, c10d::AllreduceOptions());
  });
  return Request(std::move(pending));
}

void ProcessGroup::broadcast(at::Tensor& tensor, int root) {
  const std::string name = "broadcast";
  check_tensor(*state_, name, tensor);
  check_peer(*state_, name, root);
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    wait_work(state_->pg->broadcast(tensors, opts));
  });
}

void ProcessGroup::reduce(at::Tensor& tensor, int root, ReduceOp op) {
  const std::string name = "reduce";
  check_tensor(*state_, name, tensor);
  check_peer(*state_, name, root);
  if (op == ReduceOp::kAvg && !at::isFloatingType(tensor.scalar_type())) {
    throw Error(state_->global_rank, name, "ReduceOp::kAvg needs a floating-point tensor");
  }
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::ReduceOptions opts;
    opts.rootRank = root;
    opts.reduceOp = to_c10d(op);
    wait_work(state_->pg->reduce(tensors, opts));
  });
  if (op == ReduceOp::kAvg && rank() == root) tensor.div_(state_->size);
}

namespace {

// Gloo needs equal shapes: exchange dim-0 sizes, pad to the largest, gather, then trim.
struct Padded {
  at::Tensor input;
  std::vector<int64_t> sizes;
  bool scalar = false;
};

}  // namespace

static Padded pad_for_gather(ProcessGroup& group, GroupState& s, const std::string& name,
                             const at::Tensor& tensor) {
  check_tensor(s, name, tensor);
  Padded out;
  out.scalar = tensor.dim() == 0;
  at::Tensor t = out.scalar ? tensor.reshape({1}) : tensor;
  auto local = torch::tensor({t.size(0)}, torch::kLong);
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int i = 0; i < s.size; ++i) outputs[0].push_back(torch::empty({1}, torch::kLong));
  guarded(s.global_rank, name + " (exchanging sizes)", [&] {
    std::vector<at::Tensor> inputs{local};
    wait_work(s.pg->allgather(outputs, inputs, c10d::AllgatherOptions()));
  });
  int64_t largest = 0;
  for (auto& size : outputs[0]) {
    out.sizes.push_back(size.item<int64_t>());
    largest = std::max(largest, out.sizes.back());
  }
  if (largest == t.size(0)) {
    out.input = t;
  } else {
    auto shape = t.sizes().vec();
    shape[0] = largest;
    out.input = torch::zeros(shape, t.options());
    out.input.narrow(0, 0, t.size(0)).copy_(t);
  }
  return out;
}

static std::vector<at::Tensor> trim(std::vector<at::Tensor> gathered, const Padded& padded) {
  for (size_t i = 0; i < gathered.size(); ++i) {
    gathered[i] = padded.scalar ? gathered[i].reshape({})
                                : gathered[i].narrow(0, 0, padded.sizes[i]).contiguous();
  }
  return gathered;
}

std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor& tensor) {
  const std::string name = "all_gather";
  Padded padded = pad_for_gather(*this, *state_, name, tensor);
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int i = 0; i < state_->size; ++i) outputs[0].push_back(torch::empty_like(padded.input));
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> inputs{padded.input};
    wait_work(state_->pg->allgather(outputs, inputs, c10d::AllgatherOptions()));
  });
  return trim(std::move(outputs[0]), padded);
}

std::vector<at::Tensor> ProcessGroup::gather(const at::Tensor& tensor, int root) {
  const std::string name = "gather";
  check_peer(*state_, name, root);
  Padded padded = pad_for_gather(*this, *state_, name, tensor);
  std::vector<std::vector<at::Tensor>> outputs;
  if (rank() == root) {
    outputs.resize(1);
    for (int i = 0; i < state_->size; ++i) outputs[0].push_back(torch::empty_like(padded.input));
  }
  guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> inputs{padded.input};
    c10d::GatherOptions opts;
    opts.rootRank = root;
    wait_work(state_->pg->gather(outputs, inputs, opts));
  });
  if (rank() != root) return {};
  return trim(std::move(outputs[0]), padded);
}

void ProcessGroup::barrier() {
  guarded(state_->global_rank, "barrier",
          [&] { wait_work(state_->pg->barrier(c10d::BarrierOptions())); });
}

void ProcessGroup::send(const at::Tensor& tensor, int dst, int tag) {
  isend(tensor, dst, tag).wait();
}

void ProcessGroup::recv(at::Tensor& tensor, int src, int tag) { irecv(tensor, src, tag).wait(); }

Request ProcessGroup::isend(const at::Tensor& tensor, int dst, int tag) {
  const std::string name = "send to rank " + std::to_string(dst);
  check_tensor(*state_, name, tensor);
  check_peer(*state_, name, dst);
  auto pending = std::make_shared<detail::PendingWork>();
  pending->rank = state_->global_rank;
  pending->operation = name;
  pending->work = guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    return state_->pg->send(tensors, dst, tag);
  });
  return Request(std::move(pending));
}

Request ProcessGroup::irecv(at::Tensor& tensor, int src, int tag) {
  const std::string name = "recv from rank " + std::to_string(src);
  check_tensor(*state_, name, tensor);
  check_peer(*state_, name, src);
  auto pending = std::make_shared<detail::PendingWork>();
  pending->rank = state_->global_rank;
  pending->operation = name;
  pending->work = guarded(state_->global_rank, name, [&] {
    std::vector<at::Tensor> tensors{tensor};
    return state_->pg->recv(tensors, src, tag);
  });
  return Request(std::move(pending));
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks) {
  const std::string name = "new_group";
  if (ranks.empty() || !std::is_sorted(ranks.begin(), ranks.end()) ||
      std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    throw Error(state_->global_rank, name, "ranks must be non-empty, sorted and distinct");
  }
  for (int r : ranks) check_peer(*state_, name, r);
  const int id = state_->subgroups_created++;
  auto it = std::find(ranks.begin(), ranks.end(), rank());
  if (it == ranks.end()) return nullptr;
  auto child = std::make_shared<GroupState>();
  child->env = state_->env;
  child->options = state_->options;
  child->backend = state_->backend;
  child->name = state_->name + "/group_" + std::to_string(id);
  child->store = compat::make_prefix_store(child->name, state_->store);
  child->rank = static_cast<int>(it - ranks.begin());
  child->size = static_cast<int>(ranks.size());
  child->global_rank = state_->global_rank;
  child->pg = guarded(state_->global_rank, name, [&] {
    return make_backend(child->backend, child->store, child->rank, child->size, *state_);
  });
  return std::make_shared<ProcessGroup>(std::move(child));
}

// ---------------------------------------------------------------- init

bool nccl_available() {
#if defined(DDP_WITH_NCCL)
  return true;
#else
  return false;
#endif
}

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options) {
  return init_process_group(options, read_launch_env(process_env(), options.allow_single_process));
}

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options, const LaunchEnv& env) {
  const std::string name = "init_process_group";
  auto state = std::make_shared<GroupState>();
  state->env = env;
  state->options = options;
  state->rank = env.rank;
  state->size = env.world_size;
  state->global_rank = env.rank;
  state->backend = resolve_backend(options, env.rank);
  compat::StorePtr root;
  if (!env.from_launcher) {
    // A world of one needs no network rendezvous.
    root = compat::make_hash_store();
  } else {
    const bool host = env.rank == 0 && !env.use_agent_store;
    root = guarded(env.rank, name, [&] {
      try {
        return compat::make_tcp_store(env.master_addr, env.master_port, host, env.world_size,
                                      options.store_timeout);
      } catch (const std::exception& e) {
        throw Error(env.rank, name,
                    std::string(host ? "hosting" : "connecting to") + " the TCPStore at " +
                        env.master_addr + ":" + std::to_string(env.master_port) + " failed (" +
                        (env.use_agent_store ? "TORCHELASTIC_USE_AGENT_STORE=True"
                                             : "TORCHELASTIC_USE_AGENT_STORE=False") +
                        "): " + describe(e));
      }
    });
  }
  state->store = compat::make_prefix_store(
      options.key_prefix + "/attempt_" + std::to_string(env.restart_count), root);
  state->pg = guarded(env.rank, name, [&] {
    return make_backend(state->backend, state->store, state->rank, state->size, *state);
  });
  return std::make_shared<ProcessGroup>(std::move(state));
}

}  // namespace ddp
