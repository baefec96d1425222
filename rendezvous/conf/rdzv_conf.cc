#include "rendezvous/conf/rdzv_conf.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "common/suggest.h"

namespace ddprun::rdzv {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Result<bool> parse_bool(std::string_view v) {
  static const std::set<std::string_view> yes{"1", "true", "True", "yes", "y"};
  static const std::set<std::string_view> no{"0", "false", "False", "no", "n"};
  if (yes.count(v)) return true;
  if (no.count(v)) return false;
  return Status::invalid_argument(fmt::format("'{}' is not a boolean (use true or false)", v));
}

Result<int> parse_int(std::string_view v) {
  int out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size() || out < 1) {
    return Status::invalid_argument(fmt::format("'{}' is not a positive integer", v));
  }
  return out;
}

}  // namespace

Result<Millis> parse_duration(std::string_view text) {
  std::string_view number = text;
  double scale = 1000.0;  // seconds by default, like torchrun
  if (number.size() > 2 && number.substr(number.size() - 2) == "ms") {
    number.remove_suffix(2);
    scale = 1.0;
  } else if (number.size() > 1 && number.back() == 's') {
    number.remove_suffix(1);
  }
  // std::from_chars for double is missing from g++ 12's libstdc++ only on old targets; strtod
  // on a bounded copy keeps it portable.
  const std::string copy(number);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(value) || value < 0) {
    return Status::invalid_argument(
        fmt::format("'{}' is not a duration (e.g. 30, 1.5s, 250ms)", text));
  }
  // Checked before converting: llround of a value beyond int64 is unspecified (fuzzing found
  // "6666666666666066666666660" seconds becoming a negative duration).
  if (value * scale > static_cast<double>(kMaxDuration.count())) {
    return Status::invalid_argument(
        fmt::format("'{}' is too long a duration (at most {} s, about 31 years)", text,
                    kMaxDuration.count() / 1000));
  }
  return Millis(static_cast<int64_t>(std::llround(value * scale)));
}

namespace {

// What the keys gave, before the rules that join several keys.
struct ConfParse {
  RendezvousConf conf;
  bool join_set = false;
  bool heartbeat_set = false;
  std::optional<Millis> legacy_timeout;  // torchrun's etcd `timeout`
};

// One --rdzv_conf key: its name, what it means, and how its value is read into a ConfParse.
// A value's error names the value; the caller adds the key.
struct ConfKey {
  std::string_view name;
  std::string_view help;
  Status (*apply)(std::string_view value, ConfParse& into);
};

template <Millis RendezvousConf::*field>
Status set_duration(std::string_view value, ConfParse& into) {
  auto d = parse_duration(value);
  if (!d) return d.status();
  into.conf.*field = *d;
  return {};
}

template <std::string RendezvousConf::*field>
Status set_path(std::string_view value, ConfParse& into) {
  if (value.empty()) return Status::invalid_argument("needs a value");
  into.conf.*field = std::string(value);
  return {};
}

// Every key, in the order docs/rendezvous.md lists them.
const std::vector<ConfKey>& conf_keys() {
  using C = RendezvousConf;
  static const std::vector<ConfKey> keys = {
      {"join_timeout", "longest a round waits for min nodes (600 s)",
       [](std::string_view v, ConfParse& p) {
         p.join_set = true;
         return set_duration<&C::join_timeout>(v, p);
       }},
      {"last_call_timeout", "extra wait for more nodes once min joined (30 s)",
       set_duration<&C::last_call_timeout>},
      {"close_timeout", "accepted for torchrun; rounds close by push (30 s)",
       set_duration<&C::close_timeout>},
      {"heartbeat_timeout", "silence after which a node is lost (interval x attempts)",
       [](std::string_view v, ConfParse& p) {
         p.heartbeat_set = true;
         return set_duration<&C::heartbeat_timeout>(v, p);
       }},
      {"keep_alive_interval", "how often a node sends a heartbeat (5 s)",
       set_duration<&C::keep_alive_interval>},
      {"keep_alive_max_attempt", "heartbeats missed before a node is lost (3)",
       [](std::string_view v, ConfParse& p) {
         auto n = parse_int(v);
         if (!n) return n.status();
         p.conf.keep_alive_max_attempt = *n;
         return Status{};
       }},
      {"read_timeout", "deadline of one exchange and of connecting (60 s)",
       set_duration<&C::read_timeout>},
      {"exclude_cooldown",
       "hosting: how long a node's host that left unfit stays out of the job (3600 s; 0: not)",
       set_duration<&C::exclude_cooldown>},
      {"is_host", "whether this node hosts the server (default: by the endpoint's host)",
       [](std::string_view v, ConfParse& p) {
         auto b = parse_bool(v);
         if (!b) return b.status();
         p.conf.is_host = *b;
         return Status{};
       }},
      {"timeout", "torchrun's etcd deadline: join_timeout unless that is given",
       [](std::string_view v, ConfParse& p) {
         auto d = parse_duration(v);
         if (!d) return d.status();
         p.legacy_timeout = *d;
         return Status{};
       }},
      {"store_type", "tcp or file; accepted for torchrun, no effect",
       [](std::string_view v, ConfParse& p) {
         if (v != "tcp" && v != "file") {
           return Status::invalid_argument(
               fmt::format("'{}' is not a store type (tcp or file)", v));
         }
         if (v == "file") {
           p.conf.notes.push_back(
               "--rdzv_conf store_type=file has no effect: ddprun's rendezvous is its own "
               "server, and the job's store is the TCP store the agent hosts");
         }
         return Status{};
       }},
      {"use_libuv", "a boolean; accepted for torchrun, no effect",
       [](std::string_view v, ConfParse&) { return parse_bool(v).status(); }},
      {"token_file", "the job's shared secret", set_path<&C::token_file>},
      {"tls_ca_file", "the CA that verifies the server (and, hosting, the clients)",
       set_path<&C::tls_ca_file>},
      {"tls_cert_file", "this node's certificate", set_path<&C::tls_cert_file>},
      {"tls_key_file", "the key of tls_cert_file", set_path<&C::tls_key_file>},
      {"tls_server_name", "the name the server's certificate carries (default: its host)",
       set_path<&C::tls_server_name>},
  };
  return keys;
}

std::vector<std::string> key_names() {
  std::vector<std::string> names;
  for (const ConfKey& key : conf_keys()) names.emplace_back(key.name);
  return names;
}

}  // namespace

Result<RendezvousConf> parse_rdzv_conf(std::string_view text) {
  ConfParse parse;
  RendezvousConf& conf = parse.conf;
  std::set<std::string, std::less<>> seen;
  text = trim(text);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::invalid_argument(fmt::format("--rdzv_conf: '{}' is not key=value", item));
    }
    const std::string key(trim(item.substr(0, eq)));
    const std::string_view value = trim(item.substr(eq + 1));
    if (!seen.insert(key).second) {
      return Status::invalid_argument(fmt::format("--rdzv_conf: key '{}' given twice", key));
    }
    const auto& keys = conf_keys();
    const auto known =
        std::find_if(keys.begin(), keys.end(), [&](const ConfKey& k) { return k.name == key; });
    if (known == keys.end()) {  // torchrun accepts keys it does not know: one warning
      static const std::vector<std::string> names = key_names();
      conf.ignored_keys.push_back(key + did_you_mean(key, names));
      continue;
    }
    if (Status s = known->apply(value, parse); !s) {
      return s.with_context(fmt::format("--rdzv_conf: key '{}'", key));
    }
  }
  const bool join_set = parse.join_set;
  bool heartbeat_set = parse.heartbeat_set;
  const std::optional<Millis>& legacy_timeout = parse.legacy_timeout;
  if (legacy_timeout && !join_set) conf.join_timeout = *legacy_timeout;
  if (heartbeat_set && conf.heartbeat_timeout <= conf.keep_alive_interval) {
    // torchrun's own meaning: heartbeat_timeout (default 5 s, the same as keep_alive_interval)
    // bounds one keep-alive exchange, and a node is lost after keep_alive_interval x
    // keep_alive_max_attempt without one. A value that short cannot be ddprun's window of
    // silence (it would end between two heartbeats), so it is read as torchrun reads it.
    conf.notes.push_back(fmt::format(
        "--rdzv_conf heartbeat_timeout={} ms is not above keep_alive_interval ({} ms): as in "
        "torchrun, a node is lost after keep_alive_interval x keep_alive_max_attempt ({} x {}) "
        "without a heartbeat; ddprun's heartbeats need no per-exchange timeout",
        conf.heartbeat_timeout.count(), conf.keep_alive_interval.count(),
        conf.keep_alive_interval.count(), conf.keep_alive_max_attempt));
    heartbeat_set = false;
  }
  if (!heartbeat_set) {
    // Checked before multiplying: the product could overflow, and it must stay a duration
    // parse_duration accepts (fuzzing found keep_alive_max_attempt=492155739 exceeding it).
    if (conf.keep_alive_interval.count() > kMaxDuration.count() / conf.keep_alive_max_attempt) {
      return Status::invalid_argument(fmt::format(
          "--rdzv_conf: heartbeat_timeout = keep_alive_interval ({} ms) x keep_alive_max_attempt "
          "({}) is too long a duration (at most {} s)",
          conf.keep_alive_interval.count(), conf.keep_alive_max_attempt,
          kMaxDuration.count() / 1000));
    }
    conf.heartbeat_timeout = conf.keep_alive_interval * conf.keep_alive_max_attempt;
  }
  if (conf.keep_alive_interval.count() == 0 || conf.heartbeat_timeout <= conf.keep_alive_interval) {
    return Status::invalid_argument(fmt::format(
        "--rdzv_conf: heartbeat_timeout ({} ms) must exceed keep_alive_interval ({} ms) > 0",
        conf.heartbeat_timeout.count(), conf.keep_alive_interval.count()));
  }
  if (conf.tls_cert_file.empty() != conf.tls_key_file.empty()) {
    return Status::invalid_argument(
        "--rdzv_conf: tls_cert_file and tls_key_file go together (this node's certificate and "
        "its key)");
  }
  if (conf.tls_ca_file.empty() && (!conf.tls_cert_file.empty() || !conf.tls_server_name.empty())) {
    return Status::invalid_argument(
        "--rdzv_conf: TLS needs tls_ca_file (the CA that signed the server's certificate): "
        "without it the server cannot be verified");
  }
  return conf;
}

}  // namespace ddprun::rdzv
