// What a rendezvous server reads from a client: frames of client messages (Hello, Join, Resume,
// reports, Progress, ...), decoded as a session decodes them, then the checks the server makes
// next on a Join's terms (validate, same_terms).
#include <cstddef>
#include <cstdint>
#include <variant>

#include "fuzz/rdzv_frames.h"
#include "rendezvous/wire/job_options.h"

using namespace ddprun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::fuzz_frame_stream({data, size}, rdzv::decode_client_message,
                          [](const rdzv::ClientMessage& message) {
                            FUZZ_CHECK(rdzv::message_name(message) != nullptr);
                            if (const auto* join = std::get_if<rdzv::JoinMsg>(&message)) {
                              const Status valid = rdzv::validate(join->job);
                              FUZZ_CHECK(valid.ok() || !valid.message().empty());
                              FUZZ_CHECK(rdzv::same_terms(join->job, join->job));
                            }
                          });
  return 0;
}
