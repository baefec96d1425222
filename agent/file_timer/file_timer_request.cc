#include "agent/file_timer/file_timer_request.h"

#include <cmath>
#include <csignal>
#include <limits>

#include <nlohmann/json.hpp>

namespace ddprun::agent {
namespace {

using nlohmann::json;

// Enough of a bad line to recognise it in a log, without echoing 4 KiB of it.
std::string excerpt(std::string_view line) {
  constexpr std::size_t kMax = 80;
  std::string out;
  for (char c : line.substr(0, kMax)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';  // a log line, not a terminal escape
  }
  if (line.size() > kMax) out += "...";
  return out;
}

Status bad(std::string_view line, const std::string& why) {
  return Status::malformed("timer request '" + excerpt(line) + "': " + why);
}

// An integer field within [lo, hi]. JSON integers only: 9.0 is not a pid.
Result<long long> integer_field(const json& object, std::string_view line, const char* name,
                                long long lo, long long hi) {
  auto it = object.find(name);
  if (it == object.end()) return bad(line, std::string("no \"") + name + "\" field");
  if (!it->is_number_integer()) {
    return bad(line, std::string("\"") + name + "\" is not an integer");
  }
  // Unsigned values beyond long long's range read back negative-or-huge; range-check both ways.
  if (it->is_number_unsigned() &&
      it->get<unsigned long long>() > static_cast<unsigned long long>(hi)) {
    return bad(line, std::string("\"") + name + "\" is out of range");
  }
  const long long value = it->get<long long>();
  if (value < lo || value > hi) return bad(line, std::string("\"") + name + "\" is out of range");
  return value;
}

}  // namespace

Result<FileTimerRequest> parse_file_timer_request(std::string_view line) {
  if (line.size() >= kMaxFileTimerRequestBytes) {
    return bad(line, "longer than " + std::to_string(kMaxFileTimerRequestBytes - 1) + " bytes");
  }
  json object;
  try {
    object = json::parse(line);
  } catch (const json::parse_error& e) {
    return bad(line, std::string("not JSON (") + e.what() + ")");
  }
  if (!object.is_object()) return bad(line, "not a JSON object");

  FileTimerRequest request;
  auto pid = integer_field(object, line, "pid", 1, std::numeric_limits<pid_t>::max());
  if (!pid) return pid.status();
  request.pid = static_cast<pid_t>(*pid);

  auto scope = object.find("scope_id");
  if (scope == object.end()) return bad(line, "no \"scope_id\" field");
  if (!scope->is_string()) return bad(line, "\"scope_id\" is not a string");
  request.scope_id = scope->get<std::string>();

  auto expiration = object.find("expiration_time");
  if (expiration == object.end()) return bad(line, "no \"expiration_time\" field");
  if (!expiration->is_number()) return bad(line, "\"expiration_time\" is not a number");
  request.expiration_time = expiration->get<double>();
  if (!std::isfinite(request.expiration_time)) {
    return bad(line, "\"expiration_time\" is not finite");
  }

  // Any value <= 0 means "do not kill" to the client; above that it must name a real signal.
  auto signal = integer_field(object, line, "signal", std::numeric_limits<int>::min(), NSIG - 1);
  if (!signal) return signal.status();
  request.signal = static_cast<int>(*signal);
  return request;
}

std::vector<Result<std::string>> FileTimerLineSplitter::feed(std::string_view bytes) {
  std::vector<Result<std::string>> out;
  while (!bytes.empty()) {
    const std::size_t newline = bytes.find('\n');
    const std::string_view chunk = bytes.substr(0, newline);
    if (!discarding_) {
      if (pending_.size() + chunk.size() > max_line_) {
        // Report once, with what was held, then drop the rest of this line.
        out.emplace_back(bad(pending_ + std::string(chunk.substr(0, 80)),
                             "longer than " + std::to_string(max_line_) + " bytes"));
        pending_.clear();
        discarding_ = true;
      } else {
        pending_.append(chunk);
      }
    }
    if (newline == std::string_view::npos) break;
    if (!discarding_ && !pending_.empty()) out.emplace_back(std::move(pending_));
    pending_.clear();
    discarding_ = false;
    bytes.remove_prefix(newline + 1);
  }
  return out;
}

}  // namespace ddprun::agent
