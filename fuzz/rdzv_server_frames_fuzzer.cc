// What a rendezvous client (the agent) reads from the server: frames of server messages
// (HelloAck, Reply, RoundAssigned, RestartRequested, JobFailed, ...), decoded as the client's
// channel decodes them; a Reply's payload is also read as a ProgressQuery answer, as the client
// does for that request.
#include <cstddef>
#include <cstdint>
#include <variant>

#include "fuzz/rdzv_frames.h"

using namespace ddprun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::fuzz_frame_stream(
      {data, size}, rdzv::decode_server_message, [](const rdzv::ServerMessage& message) {
        if (const auto* reply = std::get_if<rdzv::Reply>(&message)) {
          auto progress = rdzv::decode_job_progress(reply->payload, rdzv::CodecLimits{});
          if (progress) {
            FUZZ_CHECK(rdzv::encode_job_progress(*progress) == reply->payload);
          } else {
            FUZZ_CHECK(progress.status().is_malformed());
          }
          // Progress's answer: the job's stragglers, canonical like every payload.
          auto stragglers = rdzv::decode_stragglers(reply->payload, rdzv::CodecLimits{});
          if (stragglers) {
            FUZZ_CHECK(rdzv::encode_stragglers(*stragglers) == reply->payload);
            FUZZ_CHECK(stragglers->stragglers.size() <= stragglers->ranks_measured);
          } else {
            FUZZ_CHECK(stragglers.status().is_malformed());
          }
        }
      });
  return 0;
}
