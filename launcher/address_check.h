// Host names a user gave, checked once before a job starts: a name the resolver says does not
// exist is a typo to fix (exit 2 at once, naming the flag), not a server to wait 600 s for; a
// resolver that does not answer is the network's state, and connecting retries it.
#pragma once

#include <functional>
#include <string>

#include "common/result.h"
#include "launcher/launch_config.h"

namespace ddprun::launcher {

// getaddrinfo's answer for a host: its return value (0, EAI_NONAME, EAI_AGAIN, ...).
using HostLookup = std::function<int(const std::string& host)>;

// The system resolver (getaddrinfo, blocking for as long as resolv.conf allows). Names under
// ".invalid" are answered EAI_NONAME without asking: RFC 6761 reserves them to never resolve
// and asks resolvers to say so at once.
int system_host_lookup(const std::string& host);

// `gai_error` for `host` as a Status: ok for 0; Status::invalid_argument for an authoritative
// "no such host" (EAI_NONAME, EAI_NODATA); Status::unavailable for anything else (EAI_AGAIN:
// no answer in time, EAI_FAIL: the server failed, ...), which a later try may cure. Pure.
Status host_lookup_status(const std::string& host, int gai_error);

// Checks the host names of `config` that the job dials: c10d's --rdzv_endpoint (each replica),
// a static job's --master_addr. An error names the flag and the host (invalid_argument: the
// user's input). A resolver that does not answer is not an error: a warning is logged that
// connecting will retry.
Status check_job_hosts(const LaunchConfig& config, const HostLookup& lookup = system_host_lookup);

}  // namespace ddprun::launcher
