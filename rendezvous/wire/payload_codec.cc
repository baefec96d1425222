#include "rendezvous/wire/payload_codec.h"

#include "rendezvous/wire/byte_io.h"
#include "rendezvous/wire/record_codec.h"

namespace ddprun::rdzv {

using detail::get;
using detail::get_entries;
using detail::put;
using detail::put_entries;

std::string encode_job_progress(const std::vector<NodeProgress>& nodes) {
  std::string out;
  ByteWriter w(out);
  w.u32(static_cast<uint32_t>(nodes.size()));
  for (const auto& n : nodes) {
    w.str(n.node_id), w.str(n.host), w.u32(n.group_rank), put_entries(w, n.ranks);
  }
  return out;
}

Result<std::vector<NodeProgress>> decode_job_progress(std::string_view payload,
                                                      const CodecLimits& limits) {
  ByteReader r(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()), payload.size()));
  uint32_t count = 0;
  // At least 16 bytes per node (two empty strings, a rank, an empty list).
  if (!r.u32(count) || count > limits.max_progress_entries || !r.count_fits(count, 16)) {
    return Status::malformed("malformed job progress");
  }
  std::vector<NodeProgress> nodes(count);
  for (auto& n : nodes) {
    if (!r.str(n.node_id, limits.max_string_bytes) || !r.str(n.host, limits.max_string_bytes) ||
        !r.u32(n.group_rank) || !get_entries(r, limits, n.ranks)) {
      return Status::malformed("malformed job progress");
    }
  }
  if (!r.at_end()) return Status::malformed("job progress has trailing bytes");
  return nodes;
}

std::string encode_stragglers(const StragglerFinding& finding) {
  std::string out;
  ByteWriter w(out);
  put(w, finding);
  return out;
}

Result<StragglerFinding> decode_stragglers(std::string_view payload, const CodecLimits& limits) {
  ByteReader r(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()), payload.size()));
  StragglerFinding finding;
  if (!get(r, limits, finding)) return Status::malformed("malformed straggler finding");
  if (!r.at_end()) return Status::malformed("straggler finding has trailing bytes");
  return finding;
}

}  // namespace ddprun::rdzv
