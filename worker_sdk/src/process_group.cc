// ProcessGroup's lifecycle: init from the launcher's environment, sub-groups, the default
// group, destroy. The operations are in collectives.cc.
#include "ddp/process_group.h"

#include <csignal>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <utility>

#include <torch/cuda.h>

#include "ddp/failure.h"
#include "group_state.h"

namespace ddp {
namespace detail {

std::string describe(const std::exception& e) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

ErrorKind kind_of(const std::string& backend_message) {
  for (const char* lost :
       {"Connection closed by peer", "Connection reset by peer", "Broken pipe"}) {
    if (backend_message.find(lost) != std::string::npos) return ErrorKind::kPeerLost;
  }
  return ErrorKind::kFailed;
}

c10::intrusive_ptr<compat::BackendBase> backend_for(GroupState& s, const std::string& operation,
                                                    std::uint64_t bytes) {
  c10::intrusive_ptr<compat::BackendBase> pg;
  {
    std::lock_guard<std::mutex> lock(s.lifecycle_mutex);
    pg = s.pg;
  }
  if (!pg) {
    throw Error(s.global_rank, operation,
                "the process group was destroyed (destroy_process_group); create a new one "
                "with init_process_group()");
  }
  s.operations.fetch_add(1, std::memory_order_relaxed);
  s.bytes.fetch_add(bytes, std::memory_order_relaxed);
  return pg;
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

}  // namespace detail

namespace {

using detail::GroupAccess;
using detail::GroupState;
using detail::guarded;
namespace compat = detail::compat;
constexpr const char* kInitOp = "init_process_group";
constexpr const char* kDestroyOp = "destroy_process_group";

// SIG_IGN for SIGPIPE, unless the program chose a disposition of its own. Gloo writes to its
// peers' sockets without MSG_NOSIGNAL: with the default action, a rank that writes to a peer
// which has just failed dies of SIGPIPE before the launcher has seen the peer exit, and the
// failure report names it as the root cause.
void ignore_sigpipe_unless_handled() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  (void)::sigaction(SIGPIPE, &ignore, nullptr);
}

// The default group, held weakly: the program's shared_ptr decides its lifetime.
std::mutex g_default_mutex;
std::weak_ptr<ProcessGroup> g_default_group;
// Default groups initialised by this process so far: a re-initialised group gets fresh store
// keys (its destroy handshake must not count the previous group's arrivals).
int g_default_groups_created = 0;

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
        throw Error(rank, kInitOp,
                    "Backend::kNccl requested, but this SDK was built without NCCL "
                    "(Debian's LibTorch has none): use Backend::kGloo or a CUDA LibTorch");
      }
      return Backend::kNccl;
    case Backend::kAuto:
      return nccl_available() && torch::cuda::is_available() ? Backend::kNccl : Backend::kGloo;
  }
  return Backend::kGloo;
}

c10::intrusive_ptr<compat::BackendBase> make_backend(Backend backend, const compat::StorePtr& store,
                                                     int rank, int size, const GroupState& parent) {
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

compat::StorePtr connect_store(const InitOptions& options, const LaunchEnv& env, bool host) {
  return guarded(env.rank, kInitOp, [&] {
    try {
      return compat::make_tcp_store(env.master_addr, env.master_port, host, env.world_size,
                                    options.store_timeout);
    } catch (const std::exception& e) {
      throw Error(env.rank, kInitOp,
                  std::string(host ? "hosting" : "connecting to") + " the TCPStore at " +
                      env.master_addr + ":" + std::to_string(env.master_port) + " failed (" +
                      (env.use_agent_store ? "TORCHELASTIC_USE_AGENT_STORE=True"
                                           : "TORCHELASTIC_USE_AGENT_STORE=False") +
                      "): " + detail::describe(e));
    }
  });
}

// Every member arrives (so none is still inside a collective); then, when a worker hosts the
// store, the others say they left it and the host waits for that before letting go.
void shutdown_handshake(GroupState& s, const compat::StorePtr& store) {
  if (s.size == 1) return;
  const auto timeout = s.options.timeout;
  guarded(s.global_rank, kDestroyOp, [&] {
    if (store->add("destroy/arrived", 1) == s.size) {
      store->set("destroy/all_arrived", std::vector<uint8_t>{1});
    }
    store->wait({"destroy/all_arrived"}, timeout);
    if (!s.store_hosted_by_a_worker) return;
    if (s.hosts_store) {
      store->wait({"destroy/all_left"}, timeout);
    } else if (store->add("destroy/left", 1) == s.size - 1) {
      store->set("destroy/all_left", std::vector<uint8_t>{1});
    }
  });
}

}  // namespace

// ---------------------------------------------------------------- Request

void Request::wait() {
  if (!work_) return;
  guarded(work_->rank, work_->operation, [&] { detail::wait_work(work_->work); });
}

bool Request::is_completed() const { return !work_ || work_->work->isCompleted(); }

// ---------------------------------------------------------------- ProcessGroup

ProcessGroup::ProcessGroup(std::shared_ptr<detail::GroupState> state) : state_(std::move(state)) {}
ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::rank() const { return state_->rank; }

void ProcessGroup::write_primary_line(const std::string& line) {
  std::cout << line << '\n' << std::flush;
}
int ProcessGroup::size() const { return state_->size; }
int ProcessGroup::global_rank() const { return state_->global_rank; }
Backend ProcessGroup::backend() const { return state_->backend; }
at::Device ProcessGroup::device() const { return state_->device; }
const LaunchEnv& ProcessGroup::launch_env() const { return state_->env; }

bool ProcessGroup::destroyed() const {
  std::lock_guard<std::mutex> lock(state_->lifecycle_mutex);
  return state_->destroyed;
}

CommCounters ProcessGroup::counters() const {
  return {state_->operations.load(std::memory_order_relaxed),
          state_->bytes.load(std::memory_order_relaxed)};
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks) {
  const std::string name = "new_group";
  if (ranks.empty() || !std::is_sorted(ranks.begin(), ranks.end()) ||
      std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    throw Error(state_->global_rank, name, "ranks must be non-empty, sorted and distinct");
  }
  for (int r : ranks) detail::check_peer(*state_, name, r);
  detail::backend_for(*state_, name);  // throws if destroyed
  const int id = state_->subgroups_created++;
  auto it = std::find(ranks.begin(), ranks.end(), rank());
  if (it == ranks.end()) return nullptr;
  auto child = std::make_shared<GroupState>();
  child->env = state_->env;
  child->options = state_->options;
  child->backend = state_->backend;
  child->device = state_->device;
  child->name = state_->name + "/group_" + std::to_string(id);
  {
    std::lock_guard<std::mutex> lock(state_->lifecycle_mutex);
    child->store = compat::make_prefix_store(child->name, state_->store);
  }
  child->rank = static_cast<int>(it - ranks.begin());
  child->size = static_cast<int>(ranks.size());
  child->global_rank = state_->global_rank;
  child->pg = guarded(state_->global_rank, name, [&] {
    return make_backend(child->backend, child->store, child->rank, child->size, *state_);
  });
  return GroupAccess::make(std::move(child));
}

// ---------------------------------------------------------------- init / destroy

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
  if (options.install_failure_handlers) install_failure_handlers();
  if (options.ignore_broken_pipes) ignore_sigpipe_unless_handled();
  std::lock_guard<std::mutex> registry(g_default_mutex);
  if (auto existing = g_default_group.lock(); existing && !existing->destroyed()) {
    throw Error(env.rank, kInitOp,
                "the default process group already exists: call destroy_process_group() "
                "before initialising another one");
  }
  auto state = std::make_shared<GroupState>();
  state->env = env;
  state->options = options;
  state->rank = env.rank;
  state->size = env.world_size;
  state->global_rank = env.rank;
  state->backend = resolve_backend(options, env.rank);
  if (state->backend == Backend::kNccl) {
    compat::select_cuda_device(env.local_rank);
    state->device = compat::nccl_device(env.local_rank);
  }
  compat::StorePtr root;
  if (!env.from_launcher) {
    root = compat::make_hash_store();  // a world of one needs no network rendezvous
  } else {
    state->store_hosted_by_a_worker = !env.use_agent_store;
    state->hosts_store = env.rank == 0 && !env.use_agent_store;
    root = connect_store(options, env, state->hosts_store);
  }
  std::string prefix = options.key_prefix + "/attempt_" + std::to_string(env.restart_count);
  if (g_default_groups_created > 0) prefix += "/init_" + std::to_string(g_default_groups_created);
  state->store = compat::make_prefix_store(prefix, root);
  state->pg = guarded(env.rank, kInitOp, [&] {
    return make_backend(state->backend, state->store, state->rank, state->size, *state);
  });
  auto group = GroupAccess::make(std::move(state));
  g_default_group = group;
  ++g_default_groups_created;
  return group;
}

std::shared_ptr<ProcessGroup> default_group() {
  std::lock_guard<std::mutex> registry(g_default_mutex);
  auto group = g_default_group.lock();
  return group && !group->destroyed() ? group : nullptr;
}

void destroy_process_group(const std::shared_ptr<ProcessGroup>& group_or_null) {
  auto group = group_or_null ? group_or_null : default_group();
  if (!group) {
    throw Error(-1, kDestroyOp,
                "there is no default process group (init_process_group was not called, or "
                "the group was already destroyed)");
  }
  GroupState& s = GroupAccess::state(*group);
  compat::StorePtr store;
  {
    std::lock_guard<std::mutex> lock(s.lifecycle_mutex);
    if (s.destroyed) return;
    store = s.store;
  }
  shutdown_handshake(s, store);
  c10::intrusive_ptr<compat::BackendBase> pg;
  {
    std::lock_guard<std::mutex> lock(s.lifecycle_mutex);
    s.destroyed = true;
    pg = std::move(s.pg);
    s.store.reset();
    s.shm.reset();
  }
  pg.reset();  // outside the lock: the backend's destructor joins its threads
}

}  // namespace ddp
