#include "rendezvous/state/open_state_store.h"

#include <fmt/format.h>

#include "rendezvous/state/etcd/etcd_client.h"
#include "rendezvous/state/etcd/etcd_state_store.h"
#include "rendezvous/state/memory_state_store.h"
#include "rendezvous/state/sqlite/sqlite_state_store.h"

namespace ddprun::rdzv::state {
namespace {

constexpr std::string_view kEtcdScheme = "etcd://";
constexpr std::string_view kSqliteScheme = "sqlite:";
constexpr std::string_view kMemoryScheme = "memory:";

// "h1:2379,h2:2379[/cluster]"
Result<StateSpec> parse_etcd(const std::string& spec, std::string_view rest) {
  StateSpec out;
  out.kind = StateSpec::Kind::kEtcd;
  if (rest.find("://") != std::string_view::npos) {
    return Status::invalid_argument(fmt::format(
        "state spec '{}': write endpoints as host:port after etcd:// (no scheme per endpoint)",
        spec));
  }
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    out.cluster = std::string(rest.substr(slash + 1));
    rest = rest.substr(0, slash);
    if (out.cluster.empty() || out.cluster.find('/') != std::string::npos) {
      return Status::invalid_argument(fmt::format(
          "state spec '{}': the cluster name after '/' must be one non-empty path segment", spec));
    }
  }
  size_t start = 0;
  while (start <= rest.size()) {
    const auto comma = std::min(rest.find(',', start), rest.size());
    const std::string endpoint(rest.substr(start, comma - start));
    if (endpoint.empty()) {
      return Status::invalid_argument(
          fmt::format("state spec '{}': empty etcd endpoint (expected host:port,host:port)", spec));
    }
    auto where = parse_host_port(endpoint, kEtcdDefaultPort);
    if (!where) return where.status().with_context(fmt::format("state spec '{}'", spec));
    out.endpoints.push_back(to_string(*where));
    start = comma + 1;
  }
  return out;
}

}  // namespace

Result<StateSpec> parse_state_spec(const std::string& spec) {
  const std::string_view s(spec);
  if (s.empty()) {
    return Status::invalid_argument(
        "empty state spec: give a directory, sqlite:DIR, etcd://host:port,... or memory:");
  }
  if (s.rfind(kEtcdScheme, 0) == 0) return parse_etcd(spec, s.substr(kEtcdScheme.size()));
  if (s.rfind("etcds://", 0) == 0 || s.rfind("https://", 0) == 0) {
    return Status::invalid_argument(
        fmt::format("state spec '{}': TLS to etcd is not supported; use etcd://", spec));
  }
  StateSpec out;
  if (s == kMemoryScheme) return out;
  if (s.rfind(kSqliteScheme, 0) == 0) {
    out.kind = StateSpec::Kind::kSqlite;
    out.directory = std::string(s.substr(kSqliteScheme.size()));
    if (out.directory.empty()) {
      return Status::invalid_argument(
          fmt::format("state spec '{}': no directory after sqlite:", spec));
    }
    return out;
  }
  if (s.find("://") != std::string_view::npos || s.rfind(kMemoryScheme, 0) == 0) {
    return Status::invalid_argument(fmt::format(
        "state spec '{}': unknown kind; expected a directory, sqlite:DIR, etcd://host:port,... "
        "or memory:",
        spec));
  }
  out.kind = StateSpec::Kind::kSqlite;
  out.directory = spec;
  return out;
}

Result<std::unique_ptr<StateStore>> open_state_store(boost::asio::io_context& io,
                                                     const StateSpec& spec) {
  switch (spec.kind) {
    case StateSpec::Kind::kMemory:
      return std::unique_ptr<StateStore>(std::make_unique<MemoryStateStore>(io));
    case StateSpec::Kind::kSqlite: {
      auto store = SqliteStateStore::open(io, {.directory = spec.directory});
      if (!store) return store.status();
      return std::unique_ptr<StateStore>(std::move(*store));
    }
    case StateSpec::Kind::kEtcd: {
      auto client =
          std::make_shared<EtcdClient>(io, EtcdClientOptions{.endpoints = spec.endpoints});
      return std::unique_ptr<StateStore>(
          std::make_unique<EtcdStateStore>(client, EtcdStateStoreOptions{.cluster = spec.cluster}));
    }
  }
  return Status::invalid_argument("unknown state store kind");
}

Result<std::unique_ptr<StateStore>> open_state_store(boost::asio::io_context& io,
                                                     const std::string& spec) {
  auto parsed = parse_state_spec(spec);
  if (!parsed) return parsed.status();
  return open_state_store(io, *parsed);
}

}  // namespace ddprun::rdzv::state
