#include "rendezvous/server/excluded_hosts.h"

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <span>

#include <fmt/format.h>

#include "rendezvous/wire/byte_io.h"

namespace ddprun::rdzv {
namespace {

constexpr uint8_t kRecordFormat = 1;
// A record's strings are one sentence and a few names; anything larger is not ours.
constexpr size_t kMaxRecordString = 64u << 10;

}  // namespace

std::optional<std::string> ExcludedHosts::exclude(ExcludedHost record) {
  auto existing = hosts_.find(record.host);
  if (existing != hosts_.end()) {
    // A second verdict on the same host never shortens the first one's cool-down.
    record.until = std::max(record.until, existing->second.until);
    existing->second = std::move(record);
    return std::nullopt;
  }
  std::optional<std::string> evicted;
  if (hosts_.size() >= max_hosts_) {
    auto first_to_end = std::min_element(hosts_.begin(), hosts_.end(), [](auto& a, auto& b) {
      return a.second.until < b.second.until;
    });
    evicted = first_to_end->first;
    hosts_.erase(first_to_end);
  }
  std::string host = record.host;
  hosts_.emplace(std::move(host), std::move(record));
  return evicted;
}

std::optional<ExcludedHost> ExcludedHosts::check(const std::string& host, WallTime now) const {
  auto it = hosts_.find(host);
  if (it == hosts_.end() || it->second.until <= now) return std::nullopt;
  return it->second;
}

bool ExcludedHosts::release(const std::string& host) { return hosts_.erase(host) > 0; }

std::vector<std::string> ExcludedHosts::expire(WallTime now) {
  std::vector<std::string> expired;
  for (auto it = hosts_.begin(); it != hosts_.end();) {
    if (it->second.until <= now) {
      expired.push_back(it->first);
      it = hosts_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

std::vector<ExcludedHost> ExcludedHosts::list(WallTime now) const {
  std::vector<ExcludedHost> kept_out;
  for (const auto& [host, record] : hosts_) {
    if (record.until > now) kept_out.push_back(record);
  }
  return kept_out;
}

std::string encode_excluded_host(const ExcludedHost& record) {
  std::string out;
  ByteWriter w(out);
  w.u8(kRecordFormat);
  w.str(record.reason);
  w.str(record.job_id);
  w.str(record.node);
  w.i64(unix_ms(record.since));
  w.i64(unix_ms(record.until));
  return out;
}

Result<ExcludedHost> decode_excluded_host(std::string_view host, std::string_view bytes) {
  ByteReader r(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  ExcludedHost record;
  record.host = std::string(host);
  uint8_t format = 0;
  int64_t since = 0;
  int64_t until = 0;
  const bool read = r.u8(format) && format == kRecordFormat &&
                    r.str(record.reason, kMaxRecordString) &&
                    r.str(record.job_id, kMaxRecordString) &&
                    r.str(record.node, kMaxRecordString) && r.i64(since) && r.i64(until);
  if (!read || !r.at_end()) {
    return Status::malformed(
        fmt::format("the stored record of excluded host '{}' is malformed (format {}, {} bytes)",
                    host, format, bytes.size()));
  }
  record.since = from_unix_ms(since);
  record.until = from_unix_ms(until);
  return record;
}

std::string format_utc(WallTime t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", utc.tm_year + 1900, utc.tm_mon + 1,
                     utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
}

int64_t unix_ms(WallTime t) {
  return std::chrono::duration_cast<Millis>(t.time_since_epoch()).count();
}

WallTime from_unix_ms(int64_t ms) {
  // Nanosecond time points end in 2262: a stored or sent value past that must not wrap.
  constexpr int64_t kLatestMs = 9'000'000'000'000;  // about the year 2255
  ms = std::clamp<int64_t>(ms, 0, kLatestMs);
  return WallTime(std::chrono::duration_cast<WallTime::duration>(Millis(ms)));
}

}  // namespace ddprun::rdzv
