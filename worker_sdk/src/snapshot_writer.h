// The background half of Snapshotter::save(): serialises (when the caller left that to it),
// frames, checksums and publishes one snapshot on its own thread while training goes on. No
// LibTorch here: the serialisation is a function the caller hands over.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "snapshot_format.h"

namespace ddp::detail {

struct SnapshotWrite {
  std::filesystem::path directory;
  SnapshotHeader header;  // names the file (global_step)
  std::string payload;    // the serialised state; framed and checksummed on the thread
  // When set, makes the payload on the writer thread (from a copy of the state it owns);
  // throws what failed.
  std::function<std::string()> make_payload;
  std::size_t keep_last = 1;
};

// Serialises (make_payload), frames, checksums and publishes `write` (publish_snapshot); ""
// or what failed (an exception from make_payload propagates). Runs on the writer thread, or on
// the caller's for synchronous saves.
std::string write_snapshot(const SnapshotWrite& write);

// Owns at most one write thread at a time. start() first finishes the previous write, so
// writes of one Snapshotter never overlap and land in step order. The thread catches
// everything; its outcome is read by finish() after the join (the join orders the accesses).
// Not thread-safe: used by the training thread only.
class SnapshotWriter {
 public:
  SnapshotWriter() = default;
  ~SnapshotWriter();  // joins; an unreported failure is printed to stderr
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Waits for the previous write (its error is kept for finish()), then starts this one.
  void start(SnapshotWrite write);
  // Waits for the write in flight, if any. Returns "" or what the writes since the last
  // finish() failed with (the first failure).
  std::string finish();
  // Waits without consuming the outcome (Snapshotter::list()).
  void join();

 private:
  std::thread thread_;
  std::string error_;       // written by the thread, read after join
  std::string unreported_;  // failures joined but not yet returned by finish()
};

}  // namespace ddp::detail
