#include "rendezvous/server/job_snapshot.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ddprun::rdzv {

namespace {
// Format 3 stores the job's record and one record per node; format 2 (read, never written)
// kept the nodes inside the job's record; it stores enums by name, where format 1 (read too)
// stored their integers.
constexpr int kFormatVersion = 3;
using json = nlohmann::json;

// One stored enum value: its name (format 2) and the integer format 1 stored. Both are pinned
// here, not derived from the enums, so that reordering or renaming an enumerator cannot change
// what stored state means; a new enumerator needs a new entry (and its name only).
template <class Enum>
struct StoredName {  // NOLINT(clang-analyzer-optin.performance.Padding): tables read in this order
  Enum value;
  const char* name;
  int v1;  // -1: not in format 1
};

template <class Enum, size_t N>
const char* stored_name(Enum value, const StoredName<Enum> (&table)[N]) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  // Every enumerator has an entry in its table: reaching here is a bug.
  throw std::logic_error("job snapshot: an enum value without a stored name");
}

// The enum stored in `j` (a name, or in format 1 an integer); throws std::out_of_range
// naming `what`, the value and the known names when it is none of them.
template <class Enum, size_t N>
Enum stored_value(const json& j, int version, const StoredName<Enum> (&table)[N],
                  const std::string& what) {
  for (const auto& entry : table) {
    if (version >= 2 ? (j.is_string() && j.get<std::string>() == entry.name)
                     : (j.is_number_integer() && j.get<int>() == entry.v1)) {
      return entry.value;
    }
  }
  std::string known;
  for (const auto& entry : table) known += (known.empty() ? "" : ", ") + std::string(entry.name);
  throw std::out_of_range(
      fmt::format("{} has an unknown value {} (known: {})", what, j.dump(), known));
}
}  // namespace

// Friend of RoundState: reads and rebuilds its private fields.
struct RoundStateCodec {
  // The stored names of the enums (see StoredName).
  static constexpr StoredName<RoundState::Phase> kPhases[] = {
      {RoundState::Phase::kGathering, "gathering", 0},
      {RoundState::Phase::kRunning, "running", 1},
      {RoundState::Phase::kSucceeded, "succeeded", 2},
      {RoundState::Phase::kFailed, "failed", 3},
  };
  static constexpr StoredName<RoundState::NodeState> kNodeStates[] = {
      {RoundState::NodeState::kIdle, "idle", 0},
      {RoundState::NodeState::kPending, "pending", 1},
      {RoundState::NodeState::kStandby, "standby", 2},
      {RoundState::NodeState::kMember, "member", 3},
  };
  static constexpr StoredName<JobFailureReason> kFailureReasons[] = {
      {JobFailureReason::kRestartsExhausted, "restarts_exhausted", 1},
      {JobFailureReason::kTooFewNodes, "too_few_nodes", 2},
      {JobFailureReason::kExitBarrierTimeout, "exit_barrier_timeout", 3},
      {JobFailureReason::kNotRestartable, "not_restartable", 4},
  };

  static json options_to_json(const JobOptions& o) {
    return {{"min_nodes", o.min_nodes},
            {"max_nodes", o.max_nodes},
            {"max_restarts", o.max_restarts},
            {"join_timeout_ms", o.join_timeout.count()},
            {"last_call_timeout_ms", o.last_call_timeout.count()},
            {"heartbeat_timeout_ms", o.heartbeat_timeout.count()},
            {"exit_barrier_timeout_ms", o.exit_barrier_timeout.count()},
            {"agent_store", o.agent_store}};
  }

  static JobOptions options_from_json(const json& j) {
    JobOptions o;
    o.min_nodes = j.at("min_nodes");
    o.max_nodes = j.at("max_nodes");
    o.max_restarts = j.at("max_restarts");
    o.join_timeout = Millis(j.at("join_timeout_ms").get<int64_t>());
    o.last_call_timeout = Millis(j.at("last_call_timeout_ms").get<int64_t>());
    o.heartbeat_timeout = Millis(j.at("heartbeat_timeout_ms").get<int64_t>());
    o.exit_barrier_timeout = Millis(j.at("exit_barrier_timeout_ms").get<int64_t>());
    o.agent_store = j.at("agent_store");
    return o;
  }

  static json node_to_json(const RoundState::NodeRecord& r) {
    json n = {{"local_world_size", r.info.local_world_size},
              {"master_addr", r.info.master_addr},
              {"master_port", r.info.master_port},
              {"state", stored_name(r.state, kNodeStates)},
              {"join_seq", r.join_seq},
              {"expected", r.expected},
              {"succeeded", r.succeeded}};
    if (r.info.node_rank_hint) n["node_rank_hint"] = *r.info.node_rank_hint;
    if (r.last_group_rank) n["group_rank"] = *r.last_group_rank;
    return n;
  }

  static RoundState::NodeRecord node_from_json(const std::string& id, const json& n, int version) {
    RoundState::NodeRecord r;
    r.info.node_id = id;
    r.info.local_world_size = n.at("local_world_size");
    r.info.master_addr = n.at("master_addr");
    r.info.master_port = n.at("master_port");
    if (n.contains("node_rank_hint")) r.info.node_rank_hint = n["node_rank_hint"].get<uint32_t>();
    r.state =
        stored_value(n.at("state"), version, kNodeStates, fmt::format("node '{}': state", id));
    r.join_seq = n.at("join_seq");
    r.expected = n.at("expected");
    r.succeeded = n.at("succeeded");
    if (n.contains("group_rank")) r.last_group_rank = n["group_rank"].get<uint32_t>();
    return r;
  }

  // The round's own fields; with `with_nodes`, its nodes too (format 2's whole record).
  static json to_json(const RoundState& s, bool with_nodes) {
    json out = {{"options", options_to_json(s.options_)},
                {"phase", stored_name(s.phase_, kPhases)},
                {"round", s.round_},
                {"restart_count", s.restart_count_},
                {"next_join_seq", s.next_join_seq_},
                {"expected_total", s.expected_total_},
                {"min_reached", s.min_reached_at_.has_value()},
                {"barrier", s.barrier_deadline_.has_value()}};
    if (with_nodes) {
      json nodes = json::object();
      for (const auto& [id, rec] : s.nodes_) nodes[id] = node_to_json(rec);
      out["nodes"] = std::move(nodes);
    }
    if (s.failure_) {
      out["failure"] = {{"reason", stored_name(s.failure_->reason, kFailureReasons)},
                        {"message", s.failure_->message},
                        {"report", s.failure_->failure_report},
                        {"exit_code", s.failure_->exit_code}};
    }
    return out;
  }

  // Rebuilds the state with its clocks restarted at `now` (job_snapshot.h).
  static RoundState from_json(const std::string& job_id, const json& j, int version,
                              SteadyTime now) {
    RoundState s(job_id, options_from_json(j.at("options")), now);
    s.phase_ = stored_value(j.at("phase"), version, kPhases, "the round's phase");
    s.round_ = j.at("round");
    s.restart_count_ = j.at("restart_count");
    s.next_join_seq_ = j.at("next_join_seq");
    s.expected_total_ = j.at("expected_total");
    if (j.at("min_reached").get<bool>()) s.min_reached_at_ = now;
    if (j.at("barrier").get<bool>()) s.barrier_deadline_ = now + s.options_.exit_barrier_timeout;
    if (j.contains("failure")) {  // absent from records written before it was kept
      const json& f = j.at("failure");
      s.failure_ = JobFailed{
          stored_value(f.at("reason"), version, kFailureReasons, "the job's failure reason"),
          f.at("message"), f.at("report"), f.at("exit_code")};
    }
    if (j.contains("nodes")) {  // format 1 and 2: the nodes inside the job's record
      for (const auto& [id, n] : j.at("nodes").items()) add_node(s, id, n, version, now);
    }
    return s;
  }

  // Adds a stored node to a state being rebuilt.
  static void add_node(RoundState& s, const std::string& id, const json& n, int version,
                       SteadyTime now) {
    RoundState::NodeRecord rec = node_from_json(id, n, version);
    // Nobody is connected to a daemon that just started: each node has heartbeat_timeout to
    // resume, as if its connection had dropped now (without the restart that detach() makes:
    // the daemon died, not the node).
    rec.grace_deadline = now + s.options_.heartbeat_timeout;
    s.graces_.emplace(*rec.grace_deadline, id);
    s.count_node(rec, +1);
    s.nodes_.emplace(id, std::move(rec));
  }

  static json node_json(const RoundState& s, const std::string& id) {
    return node_to_json(s.nodes_.at(id));
  }
};

namespace {
// Every number stored is an integer: a fraction or an exponent (a damaged record) would be
// converted to an integer field, which is undefined for values out of range. Refused instead.
bool has_fraction(const json& j) {
  if (j.is_number_float()) return true;
  if (j.is_structured()) {
    for (const auto& item : j) {
      if (has_fraction(item)) return true;
    }
  }
  return false;
}

json job_json(const RoundState& round) {
  json j = {{"v", kFormatVersion}, {"round", RoundStateCodec::to_json(round, false)}};
  return j;
}
}  // namespace

std::string encode_job_record(const RoundState& round) { return job_json(round).dump(); }

std::string encode_node_record(const RoundState& round, const std::string& node_id, uint64_t token,
                               uint32_t join_request) {
  json n = RoundStateCodec::node_json(round, node_id);
  n["v"] = kFormatVersion;
  if (token != 0) n["token"] = token;
  if (join_request != 0) n["join_request"] = join_request;
  return n.dump();
}

state::StoredJob encode_job_snapshot(const RoundState& round,
                                     const std::map<std::string, uint64_t>& tokens,
                                     const std::map<std::string, uint32_t>& join_requests) {
  state::StoredJob out;
  out.job = encode_job_record(round);
  for (const auto& node : round.snapshot().nodes) {
    auto token = tokens.find(node.node_id);
    auto join = join_requests.find(node.node_id);
    out.nodes.emplace(
        node.node_id,
        encode_node_record(round, node.node_id, token == tokens.end() ? 0 : token->second,
                           join == join_requests.end() ? 0 : join->second));
  }
  return out;
}

Result<JobSnapshot> decode_job_snapshot(const std::string& job_id, const state::StoredJob& stored,
                                        SteadyTime now) {
  auto bad = [&](const std::string& why) {
    return Status::malformed(
        fmt::format("the stored state of job '{}' is unreadable: {}", job_id, why));
  };
  auto newer = [&](int version) {
    return Status::refused(fmt::format(
        "the stored state of job '{}' was written by a newer ddp-rendezvous (format {}; this "
        "build reads up to {})",
        job_id, version, kFormatVersion));
  };
  const json j = json::parse(stored.job, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (has_fraction(j)) return bad("the job's record has a number that is not an integer");
  std::string where = "the job's record";
  try {
    const int version = j.at("v");
    if (version < 1) return bad(fmt::format("unknown format {}", version));
    if (version > kFormatVersion) return newer(version);
    JobSnapshot out;
    out.whole_record = version < 3;
    if (j.contains("round")) {
      out.round.emplace(RoundStateCodec::from_json(job_id, j["round"], version, now));
    }
    if (j.contains("tokens")) {  // formats 1 and 2
      out.tokens = j.at("tokens").get<std::map<std::string, uint64_t>>();
    }
    if (j.contains("join_requests")) {
      out.join_requests = j["join_requests"].get<std::map<std::string, uint32_t>>();
    }
    for (const auto& [id, bytes] : stored.nodes) {
      where = fmt::format("node '{}'", id);
      const json n = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
      if (n.is_discarded() || !n.is_object()) return bad(where + ": not a JSON object");
      if (has_fraction(n)) return bad(where + ": a number that is not an integer");
      const int node_version = n.at("v");
      if (node_version > kFormatVersion) return newer(node_version);
      if (node_version < 3) return bad(fmt::format("{}: unknown format {}", where, node_version));
      if (!out.round) return bad(where + " is stored for a job without a round");
      RoundStateCodec::add_node(*out.round, id, n, node_version, now);
      if (n.contains("token")) out.tokens[id] = n["token"].get<uint64_t>();
      if (n.contains("join_request")) out.join_requests[id] = n["join_request"].get<uint32_t>();
    }
    return out;
  } catch (const std::exception& e) {
    return bad(where + ": " + e.what());
  }
}

}  // namespace ddprun::rdzv
