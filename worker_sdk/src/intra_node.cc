// Setting up and using the shared-memory all-reduce (shm_all_reduce.h) for a group whose
// ranks all run on this node. The set-up is collective, through the group's store:
//   rank 0 creates the segment and publishes its name (or that it failed); the others
//   attach; every rank reports whether it succeeded; when all have, rank 0 removes the name
//   (the memory stays until the last rank unmaps it, so a crash after set-up leaks nothing;
//   a set-up that throws removes the name too, from ShmAllReduce's destructor; only rank 0
//   killed inside the set-up itself leaves the name in /dev/shm); if any rank failed, every
//   rank forgets the segment and the group stays on its backend.
#include <unistd.h>

#include <cctype>
#include <random>

#include "group_state.h"

namespace ddp::detail {
namespace {

constexpr const char* kOp = "all_reduce (shared memory)";

// A name for shm_open: one path component, unique per job, attempt, group and set-up.
std::string segment_name(const GroupState& s) {
  std::string name = "/ddprun-" + s.env.run_id + "-" + std::to_string(s.env.restart_count) + "-" +
                     s.name + "-" + std::to_string(::getpid()) + "-" +
                     std::to_string(std::random_device{}());
  for (std::size_t i = 1; i < name.size(); ++i) {
    const char c = name[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') name[i] = '_';
  }
  return name.substr(0, 200);
}

std::string as_string(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

void set_up(GroupState& s, const compat::StorePtr& store) {
  s.shm_decided = true;
  const auto timeout = s.options.timeout;  // a collective, bounded like one
  std::string error;
  std::unique_ptr<ShmAllReduce> shm;
  if (s.rank == 0) {
    const std::string name = segment_name(s);
    shm = ShmAllReduce::create(name, s.size, 0, ShmAllReduce::kDefaultSlotBytes, &error);
    const std::string published = shm ? name : "";
    store->set("shm/name", std::vector<uint8_t>(published.begin(), published.end()));
  } else {
    store->wait({"shm/name"}, timeout);
    const std::string name = as_string(store->get("shm/name"));
    if (!name.empty()) shm = ShmAllReduce::attach(name, s.size, s.rank, &error);
  }
  store->add("shm/ok", shm ? 1 : 0);
  if (store->add("shm/reported", 1) == s.size) store->set("shm/done", std::vector<uint8_t>{1});
  store->wait({"shm/done"}, timeout);
  const bool everyone = store->add("shm/ok", 0) == s.size;
  if (s.rank == 0 && shm) shm->unlink_name();
  if (everyone) s.shm = std::move(shm);
}

}  // namespace

bool intra_node_eligible(const ProcessGroup& group, const at::Tensor& t) {
  const GroupState& s = GroupAccess::state(group);
  return s.options.shared_memory_all_reduce && s.size > 1 && s.env.from_launcher &&
         s.env.local_world_size == s.env.world_size && s.size <= ShmAllReduce::kMaxRanks &&
         t.device().is_cpu() && t.is_contiguous() && !t.is_sparse() &&
         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble);
}

bool intra_node_all_reduce(ProcessGroup& group, at::Tensor& t) {
  GroupState& s = GroupAccess::state(group);
  if (!s.shm_decided) {
    compat::StorePtr store;
    {
      std::lock_guard<std::mutex> lock(s.lifecycle_mutex);
      store = s.store;
    }
    if (!store) backend_for(s, "all_reduce");  // destroyed: throws
    guarded(s.global_rank, kOp, [&] { set_up(s, store); });
  }
  if (!s.shm) return false;
  backend_for(s, "all_reduce", bytes_of(t));          // counts it; throws if destroyed
  const CollectiveScope in_collective("all_reduce");  // waits for the node's other ranks
  const auto outcome = s.shm->all_reduce_sum(
      t.data_ptr(), static_cast<std::size_t>(t.numel()),
      t.scalar_type() == at::kFloat ? ShmElement::kFloat32 : ShmElement::kFloat64,
      std::chrono::steady_clock::now() + s.options.timeout);
  if (!outcome.ok()) {
    note_failed_collective("all_reduce");
    throw Error(s.global_rank, kOp, outcome.message,
                outcome.code == ShmOutcome::kPeerGone ? ErrorKind::kPeerLost : ErrorKind::kFailed);
  }
  return true;
}

}  // namespace ddp::detail
