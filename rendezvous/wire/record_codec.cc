#include "rendezvous/wire/record_codec.h"

#include <algorithm>

namespace ddprun::rdzv::detail {

// Encoders: one overload per message, writing type byte and payload.
void put(ByteWriter& w, const NodeInfo& n) {
  w.str(n.node_id), w.u32(n.local_world_size);
  w.i32(n.node_rank_hint ? static_cast<int32_t>(*n.node_rank_hint) : -1);
  w.str(n.master_addr), w.u16(n.master_port);
}
void put(ByteWriter& w, const JobOptions& o) {
  w.u32(o.min_nodes), w.u32(o.max_nodes), w.u32(o.max_restarts);
  for (Millis t :
       {o.join_timeout, o.last_call_timeout, o.heartbeat_timeout, o.exit_barrier_timeout}) {
    w.u64(static_cast<uint64_t>(std::max<int64_t>(t.count(), 0)));
  }
  w.u8(o.agent_store ? 1 : 0);
}
void put(ByteWriter& w, const RankProgressEntry& e) {
  w.u32(e.rank), w.u32(e.local_rank), w.i64(e.step), w.u64(e.heartbeat_age_ms);
  w.u8(e.heartbeat_seen ? 1 : 0), w.u8(e.activity), w.str(e.where), w.u64(e.busy_us);
}
void put_entries(ByteWriter& w, const std::vector<RankProgressEntry>& entries) {
  w.u32(static_cast<uint32_t>(entries.size()));
  for (const auto& e : entries) put(w, e);
}
void put(ByteWriter& w, const NodeStatus& n) {
  w.str(n.node_id), w.str(n.address), w.u8(static_cast<uint8_t>(n.phase)), w.i32(n.group_rank);
  w.u32(n.local_world_size), w.i64(n.last_heard_ms);
}
void put(ByteWriter& w, const StragglerFinding& f) {
  w.u32(f.threshold_milli), w.u32(f.ranks_measured), w.u64(f.median_us);
  w.u32(static_cast<uint32_t>(f.stragglers.size()));
  for (const StragglerEntry& s : f.stragglers) {
    w.u32(s.rank), w.u32(s.local_rank), w.str(s.node), w.u64(s.busy_us);
  }
}
void put(ByteWriter& w, const JobStatus& j) {
  w.str(j.job_id), w.u8(static_cast<uint8_t>(j.phase)), w.u64(j.round), w.u32(j.restart_count);
  w.u32(j.max_restarts), w.u32(j.min_nodes), w.u32(j.max_nodes), w.u32(j.connections);
  w.u32(static_cast<uint32_t>(j.nodes.size()));
  for (const NodeStatus& n : j.nodes) put(w, n);
  put(w, j.stragglers);
}

bool get(ByteReader& r, const CodecLimits& l, NodeInfo& n) {
  int32_t hint = -1;
  bool good = r.str(n.node_id, l.max_string_bytes) && r.u32(n.local_world_size) && r.i32(hint) &&
              r.str(n.master_addr, l.max_string_bytes) && r.u16(n.master_port);
  if (hint >= 0) n.node_rank_hint = static_cast<uint32_t>(hint);
  return good && hint >= -1;
}
bool get(ByteReader& r, const CodecLimits&, JobOptions& o) {
  if (!r.u32(o.min_nodes) || !r.u32(o.max_nodes) || !r.u32(o.max_restarts)) return false;
  for (Millis* t :
       {&o.join_timeout, &o.last_call_timeout, &o.heartbeat_timeout, &o.exit_barrier_timeout}) {
    uint64_t ms = 0;
    // Bounded so that no deadline arithmetic on a peer's value can overflow: 10 years.
    if (!r.u64(ms) || ms > kMaxTimeoutMs) return false;
    *t = Millis(static_cast<int64_t>(ms));
  }
  uint8_t agent_store = 0;
  if (!r.u8(agent_store) || agent_store > 1) return false;
  o.agent_store = agent_store == 1;
  return true;
}
bool get(ByteReader& r, const CodecLimits&, RankProgressEntry& e) {
  uint8_t seen = 0;
  const bool good = r.u32(e.rank) && r.u32(e.local_rank) && r.i64(e.step) &&
                    r.u64(e.heartbeat_age_ms) && r.u8(seen) && r.u8(e.activity) &&
                    r.str(e.where, kMaxWhereBytes) && r.u64(e.busy_us);
  e.heartbeat_seen = seen == 1;
  return good && seen <= 1 && e.step >= -1 && e.activity <= kMaxActivity;
}
bool get_entries(ByteReader& r, const CodecLimits& l, std::vector<RankProgressEntry>& out) {
  uint32_t count = 0;
  // At least 38 bytes per entry: the count must fit in what is left before anything is
  // allocated.
  if (!r.u32(count) || count > l.max_progress_entries || !r.count_fits(count, 38)) return false;
  out.resize(count);
  for (auto& e : out) {
    if (!get(r, l, e)) return false;
  }
  return true;
}
bool get(ByteReader& r, const CodecLimits& l, NodeStatus& n) {
  uint8_t phase = 0;
  bool good = r.str(n.node_id, l.max_string_bytes) && r.str(n.address, l.max_string_bytes) &&
              r.u8(phase) && r.i32(n.group_rank) && r.u32(n.local_world_size) &&
              r.i64(n.last_heard_ms);
  n.phase = static_cast<NodePhase>(phase);
  return good && phase >= 1 && phase <= 4 && n.group_rank >= -1 && n.last_heard_ms >= -1;
}
// Stragglers are ranks of one job: at most max_progress_entries of them, each with a busy time.
bool get(ByteReader& r, const CodecLimits& l, StragglerFinding& f) {
  uint32_t count = 0;
  if (!r.u32(f.threshold_milli) || !r.u32(f.ranks_measured) || !r.u64(f.median_us) ||
      !r.u32(count) || count > l.max_progress_entries || count > f.ranks_measured ||
      !r.count_fits(count, kMinStragglerBytes)) {
    return false;
  }
  f.stragglers.resize(count);  // bounded by the bytes present (count_fits)
  for (StragglerEntry& s : f.stragglers) {
    if (!r.u32(s.rank) || !r.u32(s.local_rank) || !r.str(s.node, l.max_string_bytes) ||
        !r.u64(s.busy_us)) {
      return false;
    }
  }
  return true;
}
bool get(ByteReader& r, const CodecLimits& l, JobStatus& j) {
  uint8_t phase = 0;
  uint32_t nodes = 0;
  if (!r.str(j.job_id, l.max_string_bytes) || !r.u8(phase) || !r.u64(j.round) ||
      !r.u32(j.restart_count) || !r.u32(j.max_restarts) || !r.u32(j.min_nodes) ||
      !r.u32(j.max_nodes) || !r.u32(j.connections) || !r.u32(nodes) || phase > 4 ||
      !r.count_fits(nodes, kMinNodeStatusBytes)) {
    return false;
  }
  j.phase = static_cast<JobPhase>(phase);
  j.nodes.resize(nodes);  // bounded by the bytes present (count_fits)
  for (NodeStatus& n : j.nodes) {
    if (!get(r, l, n)) return false;
  }
  return get(r, l, j.stragglers);
}

}  // namespace ddprun::rdzv::detail
