// ProgressQuery's answer (a Reply's payload): every node's ranks' progress, decoded as the
// agent's hang detection decodes it. The encoding is canonical: what decodes re-encodes to the
// same bytes; tighter limits accept a subset.
#include <cstddef>
#include <cstdint>

#include "fuzz/rdzv_frames.h"

using namespace ddprun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view payload = fuzz::as_text(data, size);
  auto nodes = rdzv::decode_job_progress(payload, rdzv::CodecLimits{});
  auto tight = rdzv::decode_job_progress(payload, fuzz::tight_limits());
  if (!nodes) {
    FUZZ_CHECK(nodes.status().is_malformed());
    FUZZ_CHECK(!tight.ok());
    return 0;
  }
  FUZZ_CHECK(rdzv::encode_job_progress(*nodes) == payload);
  if (tight) FUZZ_CHECK(*tight == *nodes);
  for (const rdzv::NodeProgress& node : *nodes) {
    for (const rdzv::RankProgressEntry& rank : node.ranks) FUZZ_CHECK(rank.step >= -1);
  }
  return 0;
}
