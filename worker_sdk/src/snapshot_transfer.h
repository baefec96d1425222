// Peer recovery: a snapshot file streamed from the rank that holds an intact copy to the ranks
// whose directory lacks one, over the process group, in fixed-size chunks so that memory stays
// bounded whatever the snapshot's size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace ddp {
class ProcessGroup;
}

namespace ddp::detail {

// The largest piece held in memory by a sender or a receiver.
inline constexpr std::size_t kSnapshotChunkBytes = 16 << 20;

struct FileTransfer {
  int root = 0;                     // the rank sending; it reads `source`
  std::filesystem::path source;     // on root only
  bool store = false;               // this rank writes what it receives (one rank per directory)
  std::filesystem::path directory;  // where to store it, when store
  int64_t global_step = 0;          // names the stored file
  std::size_t keep_last = 1;        // retention applied after storing
};

// Collective over `group` (every rank calls it with the same root): the size, then
// ceil(size / kSnapshotChunkBytes) broadcasts of uint8 tensors. Storing ranks write a temp file
// and publish it atomically (DurableFile) and prune to keep_last. Returns "" or what failed on
// this rank (a root that cannot read its copy sends zeros for the rest, which the receivers'
// checksum then rejects). Throws ddp::Error only when a collective fails.
std::string transfer_snapshot(ProcessGroup& group, const FileTransfer& transfer);

}  // namespace ddp::detail
