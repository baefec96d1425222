// The state behind a ddp::ProcessGroup and the helpers its implementation files share
// (process_group.cc: lifecycle; collectives.cc: operations). Internal: includes c10d headers
// through torch_compat.h, so only the process-group files include it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "ddp/error.h"
#include "ddp/process_group.h"
#include "detail/torch_compat.h"
#include "fatal_signals.h"
#include "shm_all_reduce.h"

namespace ddp::detail {

// Everything a group needs; owned by its ProcessGroup (and shared with in-flight Requests).
struct GroupState {
  LaunchEnv env;
  InitOptions options;
  Backend backend = Backend::kGloo;
  at::Device device{at::kCPU};  // see ProcessGroup::device()
  int rank = 0;                 // within this group
  int size = 1;                 // of this group
  int global_rank = 0;          // in the job
  std::string name = "default";
  // This process hosts the TCPStore server (rank 0 of the default group under ddprun): at
  // destroy it waits until every other rank has left the store.
  bool hosts_store = false;
  // The default group with a worker-hosted store: non-hosts announce that they left it.
  bool store_hosted_by_a_worker = false;

  mutable std::mutex lifecycle_mutex;  // guards the three fields below against destroy
  compat::StorePtr store;              // the job's store, prefixed with attempt (and group)
  c10::intrusive_ptr<compat::BackendBase> pg;
  bool destroyed = false;

  // Sub-groups created so far from this group; identical on every member because new_group
  // is collective, so it names the sub-group's store prefix consistently.
  int subgroups_created = 0;
  std::atomic<std::uint64_t> operations{0};
  std::atomic<std::uint64_t> bytes{0};
  // Shared-memory all-reduce (intra_node.cc): decided at the first eligible all-reduce.
  bool shm_decided = false;
  std::unique_ptr<ShmAllReduce> shm;  // null: use the backend
};

struct PendingWork {
  compat::WorkPtr work;
  int rank = 0;
  std::string operation;
};

// Builds ProcessGroup handles and reaches their state (ProcessGroup's friend).
struct GroupAccess {
  static std::shared_ptr<ProcessGroup> make(std::shared_ptr<GroupState> state) {
    return std::shared_ptr<ProcessGroup>(new ProcessGroup(std::move(state)));
  }
  static GroupState& state(const ProcessGroup& group) { return *group.state_; }
};

// c10::Error's what() carries a C++ backtrace; users need the message only.
std::string describe(const std::exception& e);

// The kind of a backend failure. c10d reports none, so this reads Gloo's message once, here
// at the boundary: a connection closed or reset by the peer means another rank went away.
ErrorKind kind_of(const std::string& backend_message);

// Runs one backend call, turning any failure into a ddp::Error naming rank and operation.
template <class F>
auto guarded(int rank, const std::string& operation, F&& f) -> decltype(f()) {
  const CollectiveScope in_collective(operation);  // a hang report shows where this rank waits
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    note_failed_collective(operation);  // a hang report then shows a victim, not a culprit
    const std::string message = describe(e);
    throw Error(rank, operation, message, kind_of(message));
  }
}

// The backend, or a ddp::Error when the group was destroyed. Counts one operation of `bytes`.
c10::intrusive_ptr<compat::BackendBase> backend_for(GroupState& s, const std::string& operation,
                                                    std::uint64_t bytes = 0);

void check_tensor(const GroupState& s, const std::string& op, const at::Tensor& t);
void check_peer(const GroupState& s, const std::string& op, int peer);
c10d::ReduceOp to_c10d(ReduceOp op);
inline void wait_work(const compat::WorkPtr& work) { work->wait(); }
inline std::uint64_t bytes_of(const at::Tensor& t) {
  return static_cast<std::uint64_t>(t.numel()) * t.element_size();
}

// Whether a sum all-reduce of `t` goes through shared memory in this group (the same answer
// on every rank for the same call). Not collective.
bool intra_node_eligible(const ProcessGroup& group, const at::Tensor& t);
// The sum all-reduce through shared memory, in place; false when the group cannot (then use
// the backend). Collective: sets the segment up on first use. Throws ddp::Error.
bool intra_node_all_reduce(ProcessGroup& group, at::Tensor& t);

// For the SDK's communication hooks: an all-to-all of equal byte chunks (in.numel() and
// out.numel() are multiples of the group size; chunk r goes to rank r), started
// asynchronously. The caller keeps both tensors alive until the request completes.
Request all_to_all_equal_async(ProcessGroup& group, at::Tensor& out, at::Tensor& in);

}  // namespace ddp::detail
