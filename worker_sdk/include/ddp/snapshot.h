// Training snapshots: save and resume a job so that a killed-and-restarted run ends with the
// same weights as an uninterrupted one.
//
// A snapshot holds the model's parameters and buffers, the optimizer's state, the training
// progress (epoch, step within the epoch, global step), every rank's RNG state (CPU, and the
// current CUDA device's when CUDA is available) and user key/values. Samplers need no state
// of their own: set_epoch(epoch) and skipping step_in_epoch batches rebuilds their position
// (see ddp/sampling.h).
//
// Contract
// - Every node keeps the snapshots, in its own directory (node-local disks, no shared file
//   system needed): SnapshotOptions::directory, where "{node}" is replaced by the node's
//   GROUP_RANK (only to give each "node" its own directory when several run on one machine).
// - One writer per distinct directory: the lowest rank of those that see it. Ranks compare
//   "<host>:<device>:<inode>" of their directory at the first save()/load_latest(), so the
//   ranks of one node (and one node's ranks on a shared mount) have one writer, which is local
//   rank 0 under a launcher. Nodes on different hosts sharing a directory (a shared file
//   system) each write the same bytes: temp names carry the host, the rename is atomic, so
//   they never corrupt each other. Model and optimizer state are the same on every DDP
//   replica; every rank's RNG state is gathered to every writer, so each copy is complete.
// - A write: a temp file in the directory, fsync, rename, fsync of the directory. A crash at
//   any point (also during a background write) leaves the previous snapshots intact.
// - Files: <directory>/snapshot-<global step, 12 digits>.ddpsnap, format in
//   worker_sdk/src/snapshot_format.h (versioned, CRC-32 checked). The newest keep_last are
//   kept in each directory, copies received from peers included.
// - save() and load_latest() are collective over the group and blocking; with
//   SnapshotOptions::background (the default) save() returns once the state is copied in
//   memory, and the serialisation, write and fsync run on a background thread (one at a time; the
//   next save(), wait(), load_latest(), list() and the destructor wait for it). A background write
//   that failed on any rank makes the next save()/wait() throw ddp::Error("snapshot.save") on
//   every rank, naming the rank, so ranks never diverge on whether saving works.
// - load_latest(): the ranks agree on the newest snapshot that is intact (decodes, checksum
//   right) on at least one rank. Ranks whose directory lacks it or holds a damaged copy receive
//   it from the lowest such rank over the process group (chunks of 16 MiB, bounded memory);
//   the writer of each such directory stores it (atomically, then retention), and every rank
//   loads the same step: a spare node with an empty directory resumes exactly. Each replaced
//   copy is reported in every rank's load_warnings() ("...: rank 2: missing on this rank;
//   received from rank 0") and on rank 0's stderr. If snapshots exist but none is intact on
//   any rank (or none loads everywhere), load_latest() throws ddp::Error("snapshot.load") on
//   every rank with the same message, rather than silently start over; ranks never resume
//   from different steps.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddp/export.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace ddp {

class ProcessGroup;

struct SnapshotOptions {
  // Where this node keeps its snapshots; created if missing. Required. A node-local path
  // (the same on every node) is the recipe; "{node}" is replaced by the node's GROUP_RANK.
  std::filesystem::path directory;
  // How many complete snapshots each directory keeps (older ones are deleted after each write,
  // and after storing a copy received from a peer). At least 1.
  std::size_t keep_last = 3;
  // Write in the background (true, the default): training only pays for a copy of the state
  // in memory (the model's and the optimizer's tensors, as large as they are), not for the
  // serialisation or the disk. A crash during the write costs only that snapshot. false:
  // save() returns once every writer has published its file (for programs that exit right
  // after saving without wait()).
  bool background = true;
  // With `background`: serialise on the writer thread from the copy (true, the default), or
  // serialise on the training thread as a synchronous save does (false). The copy follows
  // nn::Module::save() (every module's parameters and buffers) and knows LibTorch's SGD,
  // Adam, AdamW, Adagrad and RMSprop; with another optimizer the state is serialised on the
  // training thread whatever this says. Set false for a module class whose own save() writes
  // more than its parameters and buffers.
  bool serialise_in_background = true;
};

struct TrainingProgress {
  int64_t epoch = 0;          // the epoch to run next when step_in_epoch == 0
  int64_t step_in_epoch = 0;  // optimizer steps already done in `epoch`
  int64_t global_step = 0;    // optimizer steps done in total; names the file
  std::map<std::string, std::string> user;
};

class DDP_API Snapshotter {
 public:
  Snapshotter(std::shared_ptr<ProcessGroup> group, SnapshotOptions options);
  // Waits for a background write (a failure is printed to stderr: a destructor cannot throw).
  ~Snapshotter();
  Snapshotter(const Snapshotter&) = delete;
  Snapshotter& operator=(const Snapshotter&) = delete;

  // Collective. Writes a snapshot of `model`, `optimizer` (may be null), every rank's RNG
  // state and `progress` into every writer's directory. Returns this rank's file (published,
  // or being published in the background). Throws ddp::Error("snapshot.save") on every rank
  // when a writer failed (this write when synchronous, the previous one when background).
  std::filesystem::path save(const torch::nn::Module& model,
                             const torch::optim::Optimizer* optimizer,
                             const TrainingProgress& progress);

  // Collective. Waits for a background write, then loads the newest snapshot intact on any
  // rank (received from a peer where missing or damaged) into `model` and `optimizer` (may be
  // null) and restores this rank's RNG state. Returns its progress, or nullopt when no rank
  // sees a snapshot (a fresh start).
  std::optional<TrainingProgress> load_latest(torch::nn::Module& model,
                                              torch::optim::Optimizer* optimizer);

  // Collective. Waits until this rank's background write is published; throws
  // ddp::Error("snapshot.save") on every rank when any rank's failed. Call before exiting
  // when the last snapshot must be on disk (the destructor waits too, but cannot throw).
  void wait();

  // This rank's directory's complete snapshot files, newest first (waits for this rank's
  // background write; not collective). Temp files of interrupted writes are not listed.
  std::vector<std::filesystem::path> list();
  // The directory this rank uses ("{node}" replaced).
  const std::filesystem::path& directory() const { return options_.directory; }
  // What the last load_latest() skipped and why, one line per file.
  const std::vector<std::string>& load_warnings() const { return warnings_; }

 private:
  struct Impl;
  void identify();
  std::vector<int64_t> candidate_steps();
  std::optional<TrainingProgress> load_step(int64_t step, torch::nn::Module& model,
                                            torch::optim::Optimizer* optimizer);
  std::string receive_copy(int64_t step, int holder, const std::vector<std::string>& problems,
                           std::string* bytes);
  void warn(const std::filesystem::path& path, const std::vector<std::string>& problems,
            const std::string& suffix);

  std::shared_ptr<ProcessGroup> group_;
  SnapshotOptions options_;
  std::vector<std::string> warnings_;
  std::unique_ptr<Impl> impl_;  // the writer thread and the directories' identities
};

}  // namespace ddp
