// The worker SDK's snapshot file (worker_sdk/src/snapshot_format.h): magic, version line, one
// line of JSON header, payload with its size and CRC-32, read back when a job resumes. Only
// the pure codec is linked (no LibTorch).
//
// Properties: nothing throws or crashes; an accepted file's payload has the promised size and
// checksum; and encoding what was decoded decodes to the same header and payload.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "snapshot_format.h"

using namespace ddp::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto snapshot = decode_snapshot(ddprun::fuzz::as_text(data, size));
  if (!snapshot) {
    FUZZ_CHECK(!snapshot.error_message().empty());
    return 0;
  }
  const SnapshotHeader& h = snapshot->header;
  FUZZ_CHECK(h.payload_bytes == snapshot->payload.size());
  FUZZ_CHECK(h.payload_crc32 == crc32_of(snapshot->payload));

  const std::string again = encode_snapshot(h, snapshot->payload);
  auto twice = decode_snapshot(again);
  FUZZ_CHECK(twice.ok());
  FUZZ_CHECK(twice->payload == snapshot->payload);
  FUZZ_CHECK(twice->header.epoch == h.epoch && twice->header.step_in_epoch == h.step_in_epoch &&
             twice->header.global_step == h.global_step &&
             twice->header.world_size == h.world_size && twice->header.user == h.user &&
             twice->header.payload_bytes == h.payload_bytes &&
             twice->header.payload_crc32 == h.payload_crc32);
  return 0;
}
