// Process groups: initialisation from the launcher's environment, collectives and
// point-to-point on tensors, and the end of the group (destroy_process_group).
//
//   auto group = ddp::init_process_group();   // RANK, WORLD_SIZE, MASTER_ADDR/PORT, ...
//   group->all_reduce(t);                     // collectives on contiguous tensors
//   ddp::destroy_process_group();             // all ranks done: safe to exit
//
// Contract
// - Collectives are collective: every member calls them in the same order with matching
//   shapes and dtypes. Tensors must be dense and contiguous; results are written in place
//   unless the function returns them.
// - Blocking calls return when the local part is complete; they throw ddp::Error (rank and
//   operation named) on failure or when InitOptions::timeout passes without the peers joining.
// - Thread-safety: one ProcessGroup may be used from one thread at a time, except that the
//   DDP reducer launches all_reduce_async from autograd threads while the training thread is
//   inside backward() (the c10d backend serialises its work queue).
// - Ownership: a ProcessGroup owns its backend; the job's groups share the store connection.
//   Under ddprun and torchrun (TORCHELASTIC_USE_AGENT_STORE=True) the launcher's agent hosts
//   the TCPStore and every rank is a client. When a worker hosts it (False: no launcher, or
//   TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1), rank 0's worker must not exit while others still
//   use it: end the job with destroy_process_group(), which waits for that.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "ddp/export.h"
#include "ddp/launch_env.h"

namespace ddp {

enum class Backend {
  kAuto,  // NCCL when the SDK was built with it and CUDA is available, Gloo otherwise
  kGloo,  // CPU tensors (and CUDA tensors via host copies)
  kNccl,  // CUDA tensors; throws at init when the SDK was built without NCCL
};

enum class ReduceOp { kSum, kAvg, kMin, kMax, kProduct };

struct InitOptions {
  Backend backend = Backend::kAuto;
  // How long a collective may wait for its peers before it throws. PyTorch's default.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  // How long connecting to (or hosting) the TCPStore may take.
  std::chrono::milliseconds store_timeout = std::chrono::minutes(5);
  // Outside a launcher (no RANK/WORLD_SIZE): run as a world of size 1 instead of throwing.
  bool allow_single_process = false;
  // Keys of this job in the store are "<key_prefix>/attempt_<restart_count>/...", so a
  // restarted worker group never reads a previous attempt's keys from an agent-hosted store.
  std::string key_prefix = "ddp";
  // Install the failure handlers of ddp/failure.h (uncaught exceptions and fatal signals
  // write the launcher's error file with a native backtrace). Default on, like torch's
  // @record on main.
  bool install_failure_handlers = true;
  // Ignore SIGPIPE (only while its disposition is still the default), as every Python
  // program does: a peer that dies mid-collective then surfaces as a ddp::Error of kind
  // kPeerLost ("Broken pipe", "Connection reset by peer"), which lets the launcher name the
  // rank that failed first, instead of killing this rank with a signal that hides it.
  bool ignore_broken_pipes = true;
  // When every rank of the job runs on this node, sum all-reduces of contiguous float32/64
  // CPU tensors (all_reduce with kSum/kAvg, and DDP's default hook) go through a shared
  // memory segment instead of Gloo's loopback TCP: each rank copies its data in once, sums
  // its share, copies the result out. Set up collectively at the first such all-reduce
  // (/dev/shm, 4 MiB per rank + 4 MiB); when any rank cannot, the group stays on Gloo.
  // Results are identical on every rank.
  bool shared_memory_all_reduce = true;
};

// What a group has handed to its backend so far (for benchmarks and tests): the number of
// collective and point-to-point calls and the bytes of their input tensors on this rank. The
// bytes on the wire depend on the algorithm (a ring all-reduce sends about 2 (n-1)/n times
// the input).
struct CommCounters {
  std::uint64_t operations = 0;
  std::uint64_t bytes = 0;
};

namespace detail {
struct GroupState;
struct GroupAccess;
struct PendingWork;
}  // namespace detail

// A handle to an operation in flight (isend, irecv, all_reduce_async). Cheap to copy.
class DDP_API Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::PendingWork> work) : work_(std::move(work)) {}
  // Blocks until the operation completes (bounded by InitOptions::timeout); throws ddp::Error.
  void wait();
  // Non-blocking.
  bool is_completed() const;

 private:
  std::shared_ptr<detail::PendingWork> work_;
};

class DDP_API ProcessGroup {
 public:
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // This process's rank within the group, and the group's size.
  int rank() const;
  int size() const;
  // This process's rank in the whole job (equals rank() for the default group).
  int global_rank() const;
  // True on the group's rank 0: the rank that logs and writes files.
  bool is_primary() const { return rank() == 0; }
  Backend backend() const;
  // Where this group's collectives run: CUDA device LOCAL_RANK (modulo the visible devices)
  // for NCCL, the CPU for Gloo. NCCL collectives need tensors there; the SDK's own
  // bookkeeping tensors (sizes, flags) are made there.
  at::Device device() const;
  const LaunchEnv& launch_env() const;
  // After destroy_process_group(): every operation then throws.
  bool destroyed() const;
  CommCounters counters() const;

  // Prints its arguments and a newline on the primary rank only; no-op elsewhere.
  template <class... Args>
  void print_primary(const Args&... args) const {
    if (!is_primary()) return;
    std::ostringstream line;
    (line << ... << args);
    write_primary_line(line.str());
  }

  // ---- Collectives (blocking) ----
  void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
  void broadcast(at::Tensor& tensor, int root = 0);
  // The result is valid on root only; other ranks' tensors are left unspecified.
  void reduce(at::Tensor& tensor, int root = 0, ReduceOp op = ReduceOp::kSum);
  // Every rank's tensor, in rank order. Sizes along dim 0 may differ between ranks; other
  // dimensions and the dtype must match.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor);
  // Like all_gather, but only root receives the list; other ranks get an empty vector.
  std::vector<at::Tensor> gather(const at::Tensor& tensor, int root = 0);
  // Reduces `input` across ranks and returns this rank's share: input.size(0) must be a
  // multiple of size(); rank r gets rows [r * k, (r + 1) * k) of the reduction, k =
  // input.size(0) / size(). Each rank sends and receives (n-1)/n of the input (all-to-all,
  // then a local reduction).
  at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp op = ReduceOp::kSum);
  // inputs[j] goes to rank j; returns what every rank sent to this one, in rank order.
  // inputs.size() == size(); dim-0 sizes may differ, other dimensions and dtype must match
  // across all tensors of all ranks.
  std::vector<at::Tensor> all_to_all(const std::vector<at::Tensor>& inputs);
  // root sends inputs[r] to rank r (inputs.size() == size() on root, ignored elsewhere); every
  // rank receives into `output`, whose shape and dtype must match the root's inputs.
  void scatter(at::Tensor& output, const std::vector<at::Tensor>& inputs, int root = 0);
  void barrier();

  // ---- Bytes (serialised objects; see ddp/object_collectives.h for c10::IValue) ----
  // Returns root's bytes on every rank (other ranks' argument is ignored).
  std::string broadcast_bytes(const std::string& bytes, int root = 0);
  // Every rank's bytes, in rank order; lengths may differ.
  std::vector<std::string> all_gather_bytes(const std::string& bytes);
  // Like all_gather_bytes on root; other ranks get an empty vector.
  std::vector<std::string> gather_bytes(const std::string& bytes, int root = 0);

  // ---- Asynchronous sum all-reduce (used by the DDP reducer and communication hooks) ----
  // Starts summing `tensor` in place; the caller keeps `tensor` alive until wait() returns.
  Request all_reduce_async(at::Tensor& tensor);

  // ---- Point-to-point ----
  void send(const at::Tensor& tensor, int dst, int tag = 0);
  void recv(at::Tensor& tensor, int src, int tag = 0);
  // The caller keeps the tensor alive and untouched until the request completes.
  Request isend(const at::Tensor& tensor, int dst, int tag = 0);
  Request irecv(at::Tensor& tensor, int src, int tag = 0);

  // ---- Sub-groups ----
  // Collective over this group: every member calls it with the same sorted, distinct ranks
  // (ranks of this group). Members get the new group; the others get nullptr.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks);

 private:
  // Writes `line` and a newline to stdout and flushes (print_primary; no <iostream> here).
  static void write_primary_line(const std::string& line);
  friend struct detail::GroupAccess;
  explicit ProcessGroup(std::shared_ptr<detail::GroupState> state);
  std::shared_ptr<detail::GroupState> state_;
};

// Creates the job's default group from the launcher's environment: connects to (or, on rank
// 0 when TORCHELASTIC_USE_AGENT_STORE is not True, hosts) the TCPStore at
// MASTER_ADDR:MASTER_PORT, and builds the backend. Blocks until every rank has joined or
// options.timeout passes. Throws ddp::Error("init_process_group"), also when a default group
// is already alive (destroy it first).
DDP_API std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options = {});
// The same with an explicit environment (tests, embedding).
DDP_API std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options,
                                                         const LaunchEnv& env);

// The group made by init_process_group while it is alive and not destroyed, else nullptr.
// The SDK holds it weakly: the program's shared_ptr keeps it alive.
DDP_API std::shared_ptr<ProcessGroup> default_group();

// Ends `group` (nullptr: the default group). Collective: blocks until every member has
// called it (bounded by InitOptions::timeout, then ddp::Error("destroy_process_group")), so
// no rank is still in a collective; on the rank hosting the store it also waits until every
// other rank is done with the store. Then releases the backend (and this group's use of the
// store); further operations on the group throw. A program that calls it needs no barrier
// before exiting. Calling it again on a destroyed group is a no-op.
DDP_API void destroy_process_group(const std::shared_ptr<ProcessGroup>& group = nullptr);

// Whether this build of the SDK has the NCCL backend.
DDP_API bool nccl_available();

}  // namespace ddp
