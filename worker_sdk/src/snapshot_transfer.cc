#include "snapshot_transfer.h"

#include <algorithm>
#include <fstream>
#include <optional>

#include <torch/torch.h>

#include "ddp/process_group.h"
#include "snapshot_files.h"

namespace ddp::detail {
namespace {

namespace fs = std::filesystem;

// Root's file size, known everywhere (-1: root cannot open its copy).
int64_t broadcast_size(ProcessGroup& group, int root, std::ifstream* in, const fs::path& source) {
  int64_t size = -1;
  if (group.rank() == root) {
    in->open(source, std::ios::binary | std::ios::ate);
    if (*in) size = static_cast<int64_t>(in->tellg());
    in->seekg(0);
  }
  at::Tensor t = torch::tensor({size}, torch::kLong).to(group.device());
  group.broadcast(t, root);
  return t.cpu().item<int64_t>();
}

// The next piece of root's file; zeros (and *error set) once reading fails.
void read_chunk(std::ifstream& in, at::Tensor& chunk, const fs::path& source, std::string* error) {
  auto* data = reinterpret_cast<char*>(chunk.data_ptr<uint8_t>());
  if (error->empty() && in.read(data, chunk.numel())) return;
  if (error->empty()) *error = "cannot read " + source.string();
  chunk.zero_();
}

}  // namespace

std::string transfer_snapshot(ProcessGroup& group, const FileTransfer& transfer) {
  std::ifstream in;
  const bool is_root = group.rank() == transfer.root;
  const int64_t size = broadcast_size(group, transfer.root, &in, transfer.source);
  if (size < 0) return is_root ? "cannot open " + transfer.source.string() : "";
  std::optional<DurableFile> out;
  std::string error;
  if (transfer.store) {
    out.emplace(transfer.directory, transfer.global_step);
    error = out->open();
  }
  const auto options = torch::TensorOptions().dtype(torch::kUInt8);
  for (int64_t offset = 0; offset < size;) {
    const int64_t n = std::min<int64_t>(kSnapshotChunkBytes, size - offset);
    at::Tensor chunk = torch::empty({n}, options);
    if (is_root) read_chunk(in, chunk, transfer.source, &error);
    // An NCCL group moves bytes through its device; Gloo uses the CPU tensor as it is.
    at::Tensor wire = chunk.to(group.device());
    group.broadcast(wire, transfer.root);
    if (out && error.empty()) {
      const at::Tensor host = wire.cpu();
      error = out->append(reinterpret_cast<const char*>(host.data_ptr<uint8_t>()), n);
    }
    offset += n;
  }
  if (out && error.empty()) error = out->commit();
  if (out && error.empty()) keep_newest(transfer.directory, transfer.keep_last);
  return error;
}

}  // namespace ddp::detail
