// The background half of Snapshotter::save(): frames, checksums and publishes one snapshot on
// its own thread while training goes on. No LibTorch: the state is serialised in memory before
// the thread starts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>

#include "snapshot_format.h"

namespace ddp::detail {

struct SnapshotWrite {
  std::filesystem::path directory;
  SnapshotHeader header;  // names the file (global_step)
  std::string payload;    // the serialised state; framed and checksummed on the thread
  std::size_t keep_last = 1;
};

// Frames, checksums and publishes `write` (publish_snapshot); "" or what failed. Runs on the
// writer thread, or on the caller's for synchronous saves.
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
