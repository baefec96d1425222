// `ddp-rendezvous release HOST [--endpoint host:port] [--json] [--token-file PATH] [--tls-*]`:
// lets a host back into a daemon's jobs before its cool-down ends. A node that left a job unfit
// to train (its workers caused too many failures, it failed its health check, a rank asked to
// exclude it) has its host kept out (server/excluded_hosts.h); `ddp-rendezvous status` lists
// such hosts. The request is a status query naming the host (protocol.md, "Status query"),
// authenticated the same way (the daemon's --token-file, TLS), so the flags are status's.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace ddprun::rdzv {

// Parses `args` (after "release") and asks the daemon to release the host. Prints one line to
// `out` (a JSON object with --json) when it was released; errors go to `err` as one line.
// Returns the exit code (common/exit_codes.h): 0 released; 1 when the host was not kept out,
// the daemon cannot be reached or refuses (authentication included); 2 for bad flags, a
// missing HOST, or a token or TLS file that cannot be used.
int release_main(const std::vector<std::string>& args, std::FILE* out, std::FILE* err);

}  // namespace ddprun::rdzv
