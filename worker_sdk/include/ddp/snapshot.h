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
// - save() and load_latest() are collective over the group and blocking.
// - Rank 0 writes: a temp file in the directory, fsync, rename, fsync of the directory; the
//   other ranks wait for it. A crash at any point leaves the previous snapshot intact.
// - Files: <directory>/snapshot-<global step, 12 digits>.ddpsnap, format in
//   worker_sdk/src/snapshot_format.h (versioned, CRC-32 checked). The last keep_last are kept.
// - Every rank reads the directory itself (one node, or a shared filesystem). The ranks
//   agree on what they load: the newest snapshot that every rank can read. A snapshot some
//   rank cannot read (missing, corrupt, truncated) is reported on rank 0's stderr and in
//   every rank's load_warnings(), naming the rank and the problem, and the previous one is
//   tried. If snapshots exist but none is readable by every rank, load_latest() throws
//   ddp::Error("snapshot.load") on every rank with the same message, rather than silently
//   start over; ranks never resume from different steps.
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
  // Where snapshots live; created by rank 0 if missing. Required.
  std::filesystem::path directory;
  // How many complete snapshots to keep (older ones are deleted after each save). At least 1.
  std::size_t keep_last = 3;
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

  // Collective. Writes a snapshot of `model`, `optimizer` (may be null), every rank's RNG
  // state and `progress`. Returns the published file. Throws ddp::Error("snapshot.save") on
  // every rank when rank 0 fails to write.
  std::filesystem::path save(const torch::nn::Module& model,
                             const torch::optim::Optimizer* optimizer,
                             const TrainingProgress& progress);

  // Collective. Loads the newest snapshot that every rank can read into `model` and
  // `optimizer` (may be null) and restores this rank's RNG state. Returns its progress, or
  // nullopt when no rank sees a snapshot (a fresh start).
  std::optional<TrainingProgress> load_latest(torch::nn::Module& model,
                                              torch::optim::Optimizer* optimizer);

  // Complete snapshot files, newest first. Temp files of interrupted writes are not listed.
  std::vector<std::filesystem::path> list() const;
  // What the last load_latest() skipped and why, one line per file.
  const std::vector<std::string>& load_warnings() const { return warnings_; }

 private:
  std::string load_file(const std::filesystem::path& path, torch::nn::Module& model,
                        torch::optim::Optimizer* optimizer, TrainingProgress* out);

  std::shared_ptr<ProcessGroup> group_;
  SnapshotOptions options_;
  std::vector<std::string> warnings_;
};

}  // namespace ddp
