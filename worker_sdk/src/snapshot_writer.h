// The background half of Snapshotter::save(): publishes one encoded snapshot on its own
// thread while training goes on. No LibTorch: the bytes are complete before the thread starts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>

namespace ddp::detail {

struct SnapshotWrite {
  std::filesystem::path directory;
  int64_t global_step = 0;
  std::string bytes;  // the whole file (encode_snapshot)
  std::size_t keep_last = 1;
};

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
