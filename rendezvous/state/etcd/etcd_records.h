// How the etcd state store writes one job (its record and its node records) as the value of
// one etcd key (etcd_state_store.h says why one key):
//
//   "ddprun-records/1\n" <job> <node count> then <node id> <node record> per node
//
// each field a netstring-like `<decimal length>:<bytes>`, the count as `<decimal>:`. Binary
// safe; the records are the server's opaque bytes. A value without the first line is what an
// older ddp-rendezvous wrote (the whole job in one record) and reads as a job without node
// records.
#pragma once

#include <string>

#include "common/result.h"
#include "rendezvous/state/state_store.h"

namespace ddprun::rdzv::state {

std::string encode_job_records(const StoredJob& job);
// Errors (kMalformed) say what is wrong and where in the value.
Result<StoredJob> decode_job_records(const std::string& value);

}  // namespace ddprun::rdzv::state
