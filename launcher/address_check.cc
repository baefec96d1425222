#include "launcher/address_check.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cctype>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/host_port.h"

namespace ddprun::launcher {
namespace {

bool ends_with_invalid_tld(std::string host) {
  while (!host.empty() && host.back() == '.') host.pop_back();  // "x.invalid." is absolute
  constexpr std::string_view kTld = ".invalid";
  if (host == kTld.substr(1)) return true;
  if (host.size() < kTld.size()) return false;
  std::string tail = host.substr(host.size() - kTld.size());
  for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return tail == kTld;
}

}  // namespace

int system_host_lookup(const std::string& host) {
  if (ends_with_invalid_tld(host)) return EAI_NONAME;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found) ::freeaddrinfo(found);
  return rc;
}

Status host_lookup_status(const std::string& host, int gai_error) {
  switch (gai_error) {
    case 0:
      return {};
#ifdef EAI_NODATA
    case EAI_NODATA:  // the name exists with no address: as unusable as a name that does not
#endif
    case EAI_NONAME:
      return Status::invalid_argument(fmt::format(
          "no such host '{}' (the resolver says it does not exist): check the name", host));
    default:
      return Status::unavailable(
          fmt::format("the resolver did not answer for '{}': {}", host, ::gai_strerror(gai_error)));
  }
}

Status check_job_hosts(const LaunchConfig& config, const HostLookup& lookup) {
  const RendezvousSettings& r = config.rendezvous;
  struct Named {
    std::string flag;
    std::string value;
    std::string host;
  };
  std::vector<Named> hosts;
  if (r.standalone) return {};  // loopback, chosen by ddprun
  if (r.backend == RendezvousBackend::kStatic) {
    hosts.push_back({"--master_addr", r.master_addr, r.master_addr});
  } else {
    std::vector<HostPort> all{{r.endpoint_host, r.endpoint_port}};
    all.insert(all.end(), r.more_endpoints.begin(), r.more_endpoints.end());
    for (const HostPort& a : all) hosts.push_back({"--rdzv_endpoint", to_string(all), a.host});
  }
  for (const Named& h : hosts) {
    if (h.host.empty()) continue;
    const Status found = host_lookup_status(h.host, lookup(h.host));
    if (found.is_invalid_argument()) return found.with_context(h.flag + " " + h.value);
    if (!found) {
      spdlog::warn("{} {}: {}; connecting will retry it", h.flag, h.value, found.message());
    }
  }
  return {};
}

}  // namespace ddprun::launcher
