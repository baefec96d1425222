#include "snapshot_writer.h"

#include <iostream>

#include "snapshot_files.h"

namespace ddp::detail {

std::string write_snapshot(const SnapshotWrite& write) {
  const std::string bytes =
      encode_snapshot(write.header, write.make_payload ? write.make_payload() : write.payload);
  return publish_snapshot(write.directory, write.header.global_step, bytes, write.keep_last);
}

SnapshotWriter::~SnapshotWriter() {
  join();
  // The Snapshotter is going away (the end of training, or an exception unwinding): nobody
  // will call finish() to raise this, so say it where the launcher's logs keep it.
  if (!unreported_.empty()) {
    std::cerr << "ddp: snapshot.save: a background write failed: " << unreported_ << "\n";
  }
}

void SnapshotWriter::join() {
  if (!thread_.joinable()) return;
  thread_.join();
  if (unreported_.empty()) unreported_ = error_;
  error_.clear();
}

void SnapshotWriter::start(SnapshotWrite write) {
  join();
  thread_ = std::thread([this, write = std::move(write)] {
    try {
      error_ = write_snapshot(write);
    } catch (const std::exception& e) {
      error_ = e.what();
    } catch (...) {
      error_ = "unknown exception";
    }
  });
}

std::string SnapshotWriter::finish() {
  join();
  std::string out;
  out.swap(unreported_);
  return out;
}

}  // namespace ddp::detail
