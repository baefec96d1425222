// A job's durable state as a restarted or newly leading ddp-rendezvous reads it back: the value
// the etcd state store wrote (rendezvous/state/etcd/etcd_records.h), then the job's record and node
// records it holds (rendezvous/server/job_snapshot.h). A database or an etcd member may hand back
// anything: damaged, truncated, from another version.
//
// Properties: a refusal is kMalformed or kRefused (a newer format) and says which job and where;
// accepted values re-encode to a value that reads back the same; an accepted job, encoded
// again whole and read back, encodes the same (its records are canonical). No undefined
// behaviour on the way (UBSan): a number with a fraction is refused, not converted.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/clock.h"
#include "fuzz/fuzz_check.h"
#include "rendezvous/server/job_snapshot.h"
#include "rendezvous/state/etcd/etcd_records.h"

using namespace ddprun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string value(reinterpret_cast<const char*>(data), size);
  auto stored = rdzv::state::decode_job_records(value);
  if (!stored) {
    FUZZ_CHECK(stored.status().is_malformed());
    FUZZ_CHECK(fuzz::starts_with(stored.error_message(), "stored job records unreadable at byte"));
    return 0;
  }
  auto back = rdzv::state::decode_job_records(rdzv::state::encode_job_records(*stored));
  FUZZ_CHECK(back.ok() && *back == *stored);
  const SteadyTime now{};
  auto job = rdzv::decode_job_snapshot("job-f", *stored, now);
  if (!job) {
    FUZZ_CHECK(job.status().is_malformed() || job.status().is_refused());
    FUZZ_CHECK(job.error_message().find("job 'job-f'") != std::string::npos);
    return 0;
  }
  if (!job->round) return 0;
  const auto again = rdzv::encode_job_snapshot(*job->round, job->tokens, job->join_requests);
  auto reread = rdzv::decode_job_snapshot("job-f", again, now);
  FUZZ_CHECK(reread.ok() && reread->round);
  FUZZ_CHECK(rdzv::encode_job_snapshot(*reread->round, reread->tokens, reread->join_requests) ==
             again);
  return 0;
}
