// SLURM's hostlist (launcher/hostlist.h), as SLURM_JOB_NODELIST or SLURM_STEP_NODELIST hand
// it to ddprun under srun: "gpu[01-04,07],login1".
//
// Properties: an error is kInvalidArgument and starts with "hostlist: "; an accepted list
// respects the limits (hosts, a name's length), every name is non-empty and holds none of the
// list's syntax ("[", "]", ","), and the names joined by commas expand to the same names. The
// first byte picks tight limits or roomy ones, so the limit checks are reached too.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "launcher/hostlist.h"

using namespace ddprun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The default input and name limits; fewer hosts than the default 65536, whose expansion
  // would make each input slow without reaching other code.
  launcher::HostlistLimits limits{.max_hosts = 4096};
  if (data[0] & 1) limits = {.max_input = 512, .max_hosts = 64, .max_name = 16};
  const std::string_view text = fuzz::as_text(data + 1, size - 1);
  auto hosts = launcher::expand_hostlist(text, limits);
  if (!hosts) {
    FUZZ_CHECK(hosts.status().is_invalid_argument());
    FUZZ_CHECK(fuzz::starts_with(hosts.error_message(), "hostlist: "));
    return 0;
  }
  FUZZ_CHECK(!hosts->empty() && hosts->size() <= limits.max_hosts);
  std::string joined;
  for (const std::string& host : *hosts) {
    FUZZ_CHECK(!host.empty() && host.size() <= limits.max_name);
    FUZZ_CHECK(host.find_first_of("[],") == std::string::npos);
    if (!joined.empty()) joined += ',';
    joined += host;
  }
  launcher::HostlistLimits roomy = limits;
  roomy.max_input = joined.size();  // the plain list may be longer than the bracketed one
  auto again = launcher::expand_hostlist(joined, roomy);
  FUZZ_CHECK(again.ok() && *again == *hosts);
  return 0;
}
