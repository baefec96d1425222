// A sum all-reduce through shared memory for ranks on one node: what the DDP default hook
// uses instead of Gloo's loopback TCP when every rank of a group runs on this machine.
//
// Why: on one node Gloo moves every byte through the kernel's TCP stack and a transport
// thread per rank (1.6 MB took ~2.3 ms and ~1.5 ms of CPU per rank on the 2-core VM, see
// docs/benchmarks.md); here each rank copies its input into its slot once, sums the part of
// the result it owns, and copies the result out.
//
// Layout of the segment: a header (per-rank phase counters, which are the futex words, and
// pids), then one slot per rank and one result area, each `slot_bytes` long. A buffer larger
// than a slot goes through in chunks. Per chunk, with seq counting chunks (identical on every
// rank because calls are collective):
//   copy input -> my slot; counter[me] = 2 seq - 1; wait until every counter >= 2 seq - 1
//   sum my share of the chunk over all slots, in rank order -> result; counter[me] = 2 seq;
//   wait until every counter >= 2 seq; copy result -> input
// Each element is summed by exactly one rank in rank order, so every rank gets the same bits.
// A slot is rewritten only after every rank has passed the wait that follows its summing,
// and the result area only after every rank has copied the previous one out.
//
// Contract: all_reduce_sum is collective over the segment's ranks, blocking, bounded by its
// deadline; a rank whose process is gone is noticed within 100 ms (kPeerGone). Not
// thread-safe: one caller at a time per object. LibTorch-free.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ddp::detail {

enum class ShmElement { kFloat32, kFloat64 };

struct ShmOutcome {
  enum Code { kOk, kTimeout, kPeerGone, kError } code = kOk;
  std::string message;  // empty when kOk
  bool ok() const { return code == kOk; }
};

class ShmAllReduce {
 public:
  static constexpr int kMaxRanks = 64;
  static constexpr std::size_t kDefaultSlotBytes = 4u << 20;

  // Rank 0 creates the named segment (shm_open O_EXCL), the others attach to it. On failure
  // `error` says why and nullptr is returned. The creator owns the name until unlink_name():
  // destroyed before that (a set-up that failed or threw), it removes the name itself, so
  // that /dev/shm keeps nothing.
  static std::unique_ptr<ShmAllReduce> create(const std::string& name, int world, int rank,
                                              std::size_t slot_bytes, std::string* error);
  static std::unique_ptr<ShmAllReduce> attach(const std::string& name, int world, int rank,
                                              std::string* error);
  ~ShmAllReduce();
  ShmAllReduce(const ShmAllReduce&) = delete;
  ShmAllReduce& operator=(const ShmAllReduce&) = delete;

  // Removes the name (the mapping stays valid; the memory goes when the last rank unmaps).
  // Call once every rank has attached.
  void unlink_name();

  // Sums `count` elements at `data` across the ranks, in place.
  ShmOutcome all_reduce_sum(void* data, std::size_t count, ShmElement type,
                            std::chrono::steady_clock::time_point deadline);

 private:
  struct Header;
  ShmAllReduce(std::string name, int world, int rank, void* base, std::size_t bytes);
  char* slot(int r) const;
  char* result() const;
  void arrive(std::uint32_t value);
  ShmOutcome wait_all(std::uint32_t value, std::chrono::steady_clock::time_point deadline);

  std::string name_;
  int world_;
  int rank_;
  void* base_;
  std::size_t bytes_;
  Header* header_;
  std::size_t slot_bytes_;
  std::uint32_t seq_ = 0;   // chunks reduced so far (the same on every rank)
  bool owns_name_ = false;  // created here, and the name not removed yet
};

}  // namespace ddp::detail
