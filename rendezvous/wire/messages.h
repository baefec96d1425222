// The messages of the rendezvous wire protocol (see protocol.md), as plain structs.
//
// Client→server messages carry a request id; the server answers each request with exactly one
// Reply of the same id (a KvWait's Reply may come much later). Pushes (RoundAssigned,
// RestartRequested, JobFailed, JobSucceeded) carry no request id: they are decisions the server
// made and sends the moment it makes them; each carries a typed reason and its payload.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "progress/records.h"
#include "rendezvous/wire/job_options.h"
#include "rendezvous/wire/node_info.h"

namespace ddprun::rdzv {

// The progress records the protocol carries (progress/records.h).
using progress::NodeProgress;
using progress::RankProgressEntry;
using progress::StragglerEntry;
using progress::StragglerFinding;

inline constexpr uint32_t kProtocolMagic = 0x44445052;  // "DDPR"
inline constexpr uint16_t kProtocolVersion = 8;

// Why the members must stop their workers and join the next round.
enum class RestartReason : uint8_t {
  kScaleUp = 1,        // a node is waiting to join; not counted as a restart
  kMemberLost = 2,     // a member left or stopped heartbeating; not counted as a restart
  kWorkerFailure = 3,  // a member's workers failed; counted as one job-wide restart
};
const char* to_string(RestartReason reason);

// Why a job ended in failure.
enum class JobFailureReason : uint8_t {
  kRestartsExhausted = 1,   // a member's workers failed with no restart left
  kTooFewNodes = 2,         // fewer than min_nodes joined within join_timeout
  kExitBarrierTimeout = 3,  // members that finished waited exit_barrier_timeout for the rest
  // A member reported a failure that must not be restarted (ReportFailureMsg::not_restartable:
  // a rank asked to stop the job, or attempts kept failing without progress); since v7.
  kNotRestartable = 4,
};
const char* to_string(JobFailureReason reason);

// ---- client → server ----
struct Hello {
  uint32_t magic = kProtocolMagic;
  uint16_t version = kProtocolVersion;
  std::string job_id;  // the job this connection belongs to
  // Empty, or a fresh kNonceBytes nonce when the client holds a token for the job: it asks
  // the server to prove that it holds the token too (security/challenge.h).
  std::string client_nonce;
};
// The client's half of the challenge-response: HMAC proof that it holds the job's token, or
// empty when the server's proof did not verify (the tokens differ; the server says so).
struct AuthProofMsg {
  std::string proof;
};
struct JoinMsg {
  uint32_t request_id = 0;
  NodeInfo node;
  JobOptions job;  // must agree with the job's (see same_terms)
  // A rendezvous server of this node's own, idle, listening on node.master_addr at this port,
  // ready to take over should the node hosting the job's server be lost (0: none). Only an
  // agent-hosted server uses it (ServerOptions::host_node_id).
  uint16_t standby_port = 0;
  // Restarts the job had used before this server knew it (the job moved here after its host
  // was lost): a new job starts counting from the largest one its first round's joins name.
  uint32_t restarts_used = 0;
  // The job moved here after its host was lost: how many nodes of the last round it ran, the
  // lost host excepted (this one included), are coming. The first round closes as soon as that
  // many have joined, without a last call, as a round after a lost member does when every
  // survivor is back. 0: not moved. Since v7.
  uint32_t survivors = 0;
};
struct ResumeMsg {  // re-attach a membership after a reconnect
  uint32_t request_id = 0;
  std::string node_id;
  uint64_t token = 0;
  // Pushes this client has received on its membership so far: the server replays the rest
  // (protocol.md, "Delivery across reconnects").
  uint64_t pushes_received = 0;
};
// Also acknowledges the pushes received so far: the server forgets those.
struct HeartbeatMsg {
  uint64_t pushes_received = 0;
};
struct ReportFailureMsg {
  uint32_t request_id = 0;
  uint64_t round = 0;
  std::string failure_report;  // the agent's report as JSON; opaque to the server
  int32_t exit_code = 1;
  // Non-empty: this failure must not be restarted, and why (one sentence, e.g. "rank 3 asked to
  // stop the job: NaN loss"): the server fails the job at once with kNotRestartable, this
  // message, the report and exit_code, whatever restarts are left. Since v7.
  std::string not_restartable;
};
struct ReportSuccessMsg {
  uint32_t request_id = 0;
  uint64_t round = 0;
};
struct LeaveMsg {
  uint32_t request_id = 0;
  // Non-empty: the node leaves because it is unfit to train (its workers caused too many of the
  // job's failures, it failed its health check, a rank asked to exclude it), and why, in one
  // sentence. The server keeps the node's host out of its jobs for its cool-down
  // (server/excluded_hosts.h). Empty: a plain leave. Since v8.
  std::string exclude_reason;
};
// A node's ranks' progress in `round`. Sent when it changes (rate-limited) and when the node's
// agent suspects a hang. The Reply's `payload` holds the job's stragglers judged by
// `straggler_threshold_milli` (encode_stragglers); empty when that is 0 (not asked).
struct ProgressMsg {
  uint32_t request_id = 0;
  uint64_t round = 0;
  // --straggler_threshold in thousandths (1500: 1.5× the job's median busy time); 0: off.
  uint32_t straggler_threshold_milli = 0;
  std::vector<RankProgressEntry> ranks;
};
// Asks for every node's latest progress in the current round; the Reply's `payload` holds it
// (encode_job_progress / decode_job_progress).
struct ProgressQueryMsg {
  uint32_t request_id = 0;
};
// A read-only query of the server's jobs (ddp-rendezvous status), sent INSTEAD of Hello as a
// connection's first frame: the server answers one StatusReport and closes. Same magic and
// version check as Hello. Belongs to no job; changes nothing. A server with a daemon-wide
// token authenticates it like a Hello (client_nonce, AuthChallenge, AuthProof) before it
// answers; a server with per-job tokens only refuses it.
struct StatusQuery {
  uint32_t magic = kProtocolMagic;
  uint16_t version = kProtocolVersion;
  std::string client_nonce;  // as Hello's: empty, or a fresh nonce when the client has a token
  // Non-empty: release this host, kept out after a node left unfit (`ddp-rendezvous release`),
  // instead of asking for the report; the answer is then one Reply (ok: released; else why
  // not). Since v8.
  std::string release_host;
};
using ClientMessage =
    std::variant<Hello, JoinMsg, ResumeMsg, HeartbeatMsg, ReportFailureMsg, ReportSuccessMsg,
                 LeaveMsg, ProgressMsg, ProgressQueryMsg, StatusQuery, AuthProofMsg>;

// ---- server → client ----
struct HelloAck {
  uint16_t version = kProtocolVersion;
};
// The server's answer to a Hello that carries a nonce, for a job that has a token: its own
// nonce and its proof that it holds the token. The client answers with AuthProof.
struct AuthChallenge {
  std::string server_nonce;
  std::string server_proof;
};
// The answer to one request: ok, or an error sentence. Join's reply carries the membership
// token in `integer`; ProgressQuery's carries the job's progress in `payload`.
struct Reply {
  uint32_t request_id = 0;
  bool ok = true;
  std::string error;
  int64_t integer = 0;
  std::string payload;  // a request's typed answer, encoded by the codec (see protocol.md)
};
// Reply::integer of a Join refused (ok false) because the node's host is kept out of the
// server's jobs for a cool-down (LeaveMsg::exclude_reason); `error` names the host, the reason
// and until when. 0 for every other refusal. Since v8.
inline constexpr int64_t kJoinRefusedHostExcluded = 1;

struct RoundAssigned {
  std::string job_id;
  uint64_t round = 0;
  uint32_t group_rank = 0;
  uint32_t group_world_size = 0;
  uint32_t local_world_size = 0;
  uint32_t rank_offset = 0;
  uint32_t world_size = 0;
  std::string master_addr;
  uint16_t master_port = 0;
  uint32_t restart_count = 0;
  uint32_t max_restarts = 0;
  // Where the rendezvous moves should this server's node be lost: the standby server of the
  // member with the lowest group rank other than the host (empty host: no successor; servers
  // not hosted by an agent never name one).
  std::string successor_host;
  uint16_t successor_port = 0;
};
struct RestartRequested {
  uint64_t round = 0;  // the round that ends
  RestartReason reason = RestartReason::kMemberLost;
  std::string message;         // one sentence for the log: what happened
  std::string failure_report;  // kWorkerFailure: the failing node's report (JSON); else empty
};
struct JobFailed {
  JobFailureReason reason = JobFailureReason::kRestartsExhausted;
  std::string message;  // one sentence for humans
  // kRestartsExhausted, kNotRestartable: the job's first failure report (JSON)
  std::string failure_report;
  int32_t exit_code = 1;
};
struct JobSucceeded {
  uint64_t round = 0;
};
struct HeartbeatAck {};
// A protocol violation or a server going away; the server closes the connection after it.
struct ErrorMsg {
  std::string message;
};
// The answer to Hello from a ddp-rendezvous replica that does not lead (docs/rendezvous.md,
// "High availability"): the leader serves at host:port; connect there. An empty host means
// that no replica leads right now (an election is under way): try again shortly, here or at
// another replica. The server closes the connection after it.
struct Redirect {
  std::string host;
  uint16_t port = 0;
};

// ---- the status report (answer to StatusQuery) ----
// Where a job is: no node has joined yet, or its RoundState's phase.
enum class JobPhase : uint8_t {
  kNoRound = 0,
  kGathering = 1,
  kRunning = 2,
  kSucceeded = 3,
  kFailed = 4
};
const char* to_string(JobPhase phase);
// Where a node is in its job (RoundState's node states).
enum class NodePhase : uint8_t {
  kPending = 1,  // joined the open round
  kStandby = 2,  // joined while a round runs; enters the next one
  kMember = 3,   // member of the running round
  kIdle = 4,     // known, not in a round (a survivor that has not re-joined yet)
};
const char* to_string(NodePhase phase);
struct NodeStatus {
  std::string node_id;
  std::string address;  // the node's connection ("ip:port"); empty while it is disconnected
  NodePhase phase = NodePhase::kPending;
  int32_t group_rank = -1;  // its rank in the running (or last) round; -1 before its first
  uint32_t local_world_size = 0;
  int64_t last_heard_ms = -1;  // since the last frame (heartbeat or request) it sent; -1 while
                               // disconnected
};
struct JobStatus {
  std::string job_id;
  JobPhase phase = JobPhase::kNoRound;
  uint64_t round = 0;  // the open or running round
  uint32_t restart_count = 0;
  uint32_t max_restarts = 0;
  uint32_t min_nodes = 0;
  uint32_t max_nodes = 0;
  uint32_t connections = 0;  // connections that said Hello for this job
  std::vector<NodeStatus> nodes;
  // The job's stragglers now, when its nodes asked for them (--straggler_threshold).
  StragglerFinding stragglers;
};
// A host the server keeps out of its jobs after a node left unfit (server/excluded_hosts.h).
struct ExcludedHostStatus {
  std::string host;
  std::string reason;    // the leaving node's sentence
  std::string job_id;    // the job it left
  std::string node;      // the node that left, as people name it
  int64_t since_ms = 0;  // when it left, Unix ms
  int64_t until_ms = 0;  // its joins are refused until then, Unix ms
  bool operator==(const ExcludedHostStatus&) const = default;
};
struct StatusReport {
  // Jobs, nodes or excluded hosts were left out to keep the frame within the frame size limit.
  bool truncated = false;
  std::vector<JobStatus> jobs;
  std::vector<ExcludedHostStatus> excluded_hosts;  // by host name; since v8
};

using ServerMessage =
    std::variant<HelloAck, Reply, RoundAssigned, RestartRequested, JobFailed, JobSucceeded,
                 HeartbeatAck, ErrorMsg, StatusReport, AuthChallenge, Redirect>;
// The decisions of a rendezvous that are pushed to members. Both ends count them per
// membership: the client acknowledges the count, the server replays what a cut lost.
using Push = std::variant<RoundAssigned, RestartRequested, JobFailed, JobSucceeded>;
inline bool is_push(const ServerMessage& m) {
  return std::holds_alternative<RoundAssigned>(m) || std::holds_alternative<RestartRequested>(m) ||
         std::holds_alternative<JobFailed>(m) || std::holds_alternative<JobSucceeded>(m);
}

}  // namespace ddprun::rdzv
