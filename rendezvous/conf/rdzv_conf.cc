#include "rendezvous/conf/rdzv_conf.h"

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
  return Status::error(fmt::format("'{}' is not a boolean (use true or false)", v));
}

Result<int> parse_int(std::string_view v) {
  int out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size() || out < 1) {
    return Status::error(fmt::format("'{}' is not a positive integer", v));
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
    return Status::error(fmt::format("'{}' is not a duration (e.g. 30, 1.5s, 250ms)", text));
  }
  // Checked before converting: llround of a value beyond int64 is unspecified (fuzzing found
  // "6666666666666066666666660" seconds becoming a negative duration).
  if (value * scale > static_cast<double>(kMaxDuration.count())) {
    return Status::error(fmt::format("'{}' is too long a duration (at most {} s, about 31 years)",
                                     text, kMaxDuration.count() / 1000));
  }
  return Millis(static_cast<int64_t>(std::llround(value * scale)));
}

namespace {
const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> keys = {"join_timeout",
                                                "last_call_timeout",
                                                "close_timeout",
                                                "heartbeat_timeout",
                                                "keep_alive_interval",
                                                "keep_alive_max_attempt",
                                                "read_timeout",
                                                "is_host",
                                                "timeout",
                                                "store_type",
                                                "use_libuv",
                                                "token_file",
                                                "tls_ca_file",
                                                "tls_cert_file",
                                                "tls_key_file",
                                                "tls_server_name"};
  return keys;
}
std::string* security_field(RendezvousConf& conf, const std::string& key) {
  if (key == "token_file") return &conf.token_file;
  if (key == "tls_ca_file") return &conf.tls_ca_file;
  if (key == "tls_cert_file") return &conf.tls_cert_file;
  if (key == "tls_key_file") return &conf.tls_key_file;
  if (key == "tls_server_name") return &conf.tls_server_name;
  return nullptr;
}
}  // namespace

Result<RendezvousConf> parse_rdzv_conf(std::string_view text) {
  RendezvousConf conf;
  std::set<std::string, std::less<>> seen;
  bool heartbeat_set = false;
  bool join_set = false;
  std::optional<Millis> legacy_timeout;
  text = trim(text);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::error(fmt::format("--rdzv_conf: '{}' is not key=value", item));
    }
    const std::string key(trim(item.substr(0, eq)));
    const std::string_view value = trim(item.substr(eq + 1));
    if (!seen.insert(key).second) {
      return Status::error(fmt::format("--rdzv_conf: key '{}' given twice", key));
    }
    Status bad;
    auto duration = [&](auto& field) {
      auto d = parse_duration(value);
      if (d) {
        field = *d;
      } else {
        bad = d.status();
      }
    };
    if (key == "join_timeout") {
      duration(conf.join_timeout);
      join_set = true;
    } else if (key == "timeout") {
      duration(legacy_timeout);
    } else if (key == "last_call_timeout") {
      duration(conf.last_call_timeout);
    } else if (key == "close_timeout") {
      duration(conf.close_timeout);
    } else if (key == "heartbeat_timeout") {
      duration(conf.heartbeat_timeout);
      heartbeat_set = true;
    } else if (key == "keep_alive_interval") {
      duration(conf.keep_alive_interval);
    } else if (key == "read_timeout") {
      duration(conf.read_timeout);
    } else if (key == "keep_alive_max_attempt") {
      auto n = parse_int(value);
      if (n) {
        conf.keep_alive_max_attempt = *n;
      } else {
        bad = n.status();
      }
    } else if (key == "is_host") {
      auto b = parse_bool(value);
      if (b) {
        conf.is_host = *b;
      } else {
        bad = b.status();
      }
    } else if (key == "store_type") {
      if (value != "tcp" && value != "file") {
        bad =
            Status::invalid_argument(fmt::format("'{}' is not a store type (tcp or file)", value));
      } else if (value == "file") {
        conf.notes.push_back(
            "--rdzv_conf store_type=file has no effect: ddprun's rendezvous is its own server, "
            "and the job's store is the TCP store the agent hosts");
      }
    } else if (std::string* path = security_field(conf, key)) {
      if (value.empty()) bad = Status::invalid_argument("needs a value");
      *path = std::string(value);
    } else if (key == "use_libuv") {
      auto b = parse_bool(value);
      if (!b) bad = b.status();
    } else {
      conf.ignored_keys.push_back(key + did_you_mean(key, known_keys()));
    }
    if (!bad) return bad.with_context(fmt::format("--rdzv_conf: key '{}'", key));
  }
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
      return Status::error(fmt::format(
          "--rdzv_conf: heartbeat_timeout = keep_alive_interval ({} ms) x keep_alive_max_attempt "
          "({}) is too long a duration (at most {} s)",
          conf.keep_alive_interval.count(), conf.keep_alive_max_attempt,
          kMaxDuration.count() / 1000));
    }
    conf.heartbeat_timeout = conf.keep_alive_interval * conf.keep_alive_max_attempt;
  }
  if (conf.keep_alive_interval.count() == 0 || conf.heartbeat_timeout <= conf.keep_alive_interval) {
    return Status::error(fmt::format(
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
