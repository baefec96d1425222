// JobRegistry and the hosts it keeps out (issue 36, excluded_hosts.h): a node that leaves a job
// unfit to train has its host refused by every job's Join for the cool-down; the record is
// saved in the state store so that a restarted daemon, or the next replica, refuses it too.
// The rest of the registry is job_registry.cc.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "rendezvous/server/job_registry.h"
#include "rendezvous/wire/node_name.h"

namespace ddprun::rdzv {

bool JobRegistry::refuse_excluded(Peer& peer, const JoinMsg& msg) {
  const std::string host = node_host(msg.node.node_id);
  // A lookup, not a sweep: joins come in bursts of thousands. Expired records are swept (and
  // removed from the store) by excluded_hosts(), which status and metrics call.
  auto kept_out = excluded_.check(host, clock_.wall_now());
  if (!kept_out) return false;
  if (counters_) ++counters_->joins_refused_excluded;
  Reply refused = error_reply(
      msg.request_id,
      fmt::format("node host {} is kept out of this server's jobs until {}: {} (node {} left job "
                  "'{}' unfit to train); an operator can release it with `ddp-rendezvous "
                  "release {}`",
                  host, format_utc(kept_out->until), kept_out->reason, kept_out->node,
                  kept_out->job_id, host));
  refused.integer = kJoinRefusedHostExcluded;
  peer.send(refused);
  return true;
}

void JobRegistry::exclude_host(const Job& job, const std::string& node_id,
                               const std::string& reason) {
  ExcludedHost record;
  record.host = node_host(node_id);
  record.reason = reason;
  record.job_id = job.id;
  record.node = node_display_name(node_id);
  record.since = clock_.wall_now();
  record.until = record.since + exclude_cooldown_;
  if (exclude_cooldown_ <= Millis(0)) {
    spdlog::warn(
        "rendezvous: node {} left job '{}' unfit to train: {} (no cool-down: its host "
        "{} may join again at once)",
        record.node, job.id, reason, record.host);
    return;
  }
  if (counters_) ++counters_->hosts_excluded;
  const std::string host = record.host;
  std::optional<std::string> evicted = excluded_.exclude(record);
  // A repeated verdict keeps the later end: save what the registry holds now.
  auto now_kept = excluded_.check(host, record.since);
  spdlog::warn(
      "rendezvous: node {} left job '{}' unfit to train: {}; its host {} is kept out of "
      "every job until {} (release: ddp-rendezvous release {})",
      record.node, job.id, reason, host, format_utc(now_kept ? now_kept->until : record.until),
      host);
  if (now_kept) save_host(host, encode_excluded_host(*now_kept));
  if (evicted) {
    spdlog::warn(
        "rendezvous: {} hosts are kept out, the most this server keeps; host {}, whose "
        "cool-down ended first, is let in again",
        excluded_.size(), *evicted);
    save_host(*evicted, std::nullopt);
  }
}

std::vector<ExcludedHost> JobRegistry::excluded_hosts() {
  const WallTime now = clock_.wall_now();
  for (const std::string& expired : excluded_.expire(now)) save_host(expired, std::nullopt);
  return excluded_.list(now);
}

bool JobRegistry::release_host(const std::string& host) {
  const bool kept_out = excluded_.check(host, clock_.wall_now()).has_value();
  const bool known = excluded_.release(host);
  if (known) save_host(host, std::nullopt);
  if (kept_out)
    spdlog::warn("rendezvous: host {} released by an operator: it may join again", host);
  return kept_out;
}

void JobRegistry::save_host(const std::string& host, std::optional<std::string> record) {
  if (!host_store_) return;
  // Not through the journal: no decision waits for it. A failed save only means a restarted
  // daemon may not remember this host (or may remember a released one until its cool-down).
  host_store_->save_excluded_host(host, std::move(record), [host](const Status& saved) {
    if (!saved) {
      spdlog::error("rendezvous: could not save excluded host {}: {}", host, saved.message());
    }
  });
}

Status JobRegistry::restore_excluded_hosts(state::StateStore& store) {
  auto stored = store.load_excluded_hosts();
  if (!stored) {
    return stored.status().with_context("loading the excluded hosts from " + store.describe());
  }
  const WallTime now = clock_.wall_now();
  std::vector<std::string> expired;
  for (const auto& [host, bytes] : *stored) {
    auto record = decode_excluded_host(host, bytes);
    if (!record) return record.status().with_context(store.describe());
    if (record->until <= now) {
      expired.push_back(host);
    } else if (auto evicted = excluded_.exclude(std::move(*record))) {
      expired.push_back(*evicted);
    }
  }
  host_store_ = &store;
  for (const std::string& host : expired) save_host(host, std::nullopt);
  if (excluded_.size() > 0) {
    spdlog::info("restored {} excluded host(s) from {}", excluded_.size(), store.describe());
  }
  return Status();
}

}  // namespace ddprun::rdzv
