// The typed answers a Reply carries in its `payload` (protocol.md "Payloads"): the job's
// progress (ProgressQuery's answer) and the job's stragglers (Progress's answer). Pure and
// bounded like the message codec (codec.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

// ProgressQuery's answer, in Reply::payload. Bounded like every frame (max_progress_entries).
std::string encode_job_progress(const std::vector<NodeProgress>& nodes);
Result<std::vector<NodeProgress>> decode_job_progress(std::string_view payload,
                                                      const CodecLimits& limits);

// Progress's answer, in Reply::payload: the job's stragglers (empty payload: none asked for).
std::string encode_stragglers(const StragglerFinding& finding);
Result<StragglerFinding> decode_stragglers(std::string_view payload, const CodecLimits& limits);

}  // namespace ddprun::rdzv
