// The messages of the rendezvous wire protocol (see protocol.md), as plain structs.
//
// Client→server messages carry a request id; the server answers each request with exactly one
// Reply of the same id (a KvWait's Reply may come much later). Pushes (RoundAssigned,
// RestartRequested, JobFailed, JobSucceeded) carry no request id: they are decisions the server
// made and sends the moment it makes them.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace ddprun::rdzv {

inline constexpr uint32_t kProtocolMagic = 0x44445052;  // "DDPR"
inline constexpr uint16_t kProtocolVersion = 1;

// Why the members must stop their workers and join the next round.
enum class RestartReason : uint8_t {
  kScaleUp = 1,        // a node is waiting to join; not counted as a restart
  kMemberLost = 2,     // a member left or stopped heartbeating; not counted as a restart
  kWorkerFailure = 3,  // a member's workers failed; counted as one job-wide restart
};
const char* to_string(RestartReason reason);

// Scope of a key-value operation: the whole job, or the job's current round (round-scoped keys
// vanish when the next round opens).
enum class KvScope : uint8_t { kJob = 0, kRound = 1 };

// ---- client → server ----
struct Hello {
  uint32_t magic = kProtocolMagic;
  uint16_t version = kProtocolVersion;
  std::string job_id;  // the job this connection belongs to (its KV namespace, its rendezvous)
};
struct JoinMsg {
  uint32_t request_id = 0;
  std::string node_id;
  uint32_t local_world_size = 1;
  int32_t node_rank_hint = -1;  // -1: none
  std::string master_addr;
  uint16_t master_port = 0;
  uint32_t min_nodes = 1;
  uint32_t max_nodes = 1;
  uint32_t max_restarts = 0;
  uint64_t join_timeout_ms = 0;
  uint64_t last_call_timeout_ms = 0;
  uint64_t heartbeat_timeout_ms = 0;
  uint64_t exit_barrier_timeout_ms = 0;
};
struct ResumeMsg {  // re-attach a membership after a reconnect
  uint32_t request_id = 0;
  std::string node_id;
  uint64_t token = 0;
};
struct HeartbeatMsg {};
struct ReportFailureMsg {
  uint32_t request_id = 0;
  uint64_t round = 0;
  std::string report;
  int32_t exit_code = 1;
};
struct ReportSuccessMsg {
  uint32_t request_id = 0;
  uint64_t round = 0;
};
struct LeaveMsg {
  uint32_t request_id = 0;
};
enum class KvOp : uint8_t { kSet, kGet, kAdd, kCompareSet, kWait, kDelete, kNumKeys };
struct KvMsg {
  KvOp op = KvOp::kGet;
  uint32_t request_id = 0;
  KvScope scope = KvScope::kJob;
  std::vector<std::string> keys;  // one key, except for kWait (one or more) and kNumKeys (none)
  std::string value;              // kSet: the value; kCompareSet: the expected value
  std::string desired;            // kCompareSet only
  int64_t delta = 0;              // kAdd only
  uint64_t timeout_ms = 0;        // kWait only
};

using ClientMessage = std::variant<Hello, JoinMsg, ResumeMsg, HeartbeatMsg, ReportFailureMsg,
                                   ReportSuccessMsg, LeaveMsg, KvMsg>;

// ---- server → client ----
struct HelloAck {
  uint16_t version = kProtocolVersion;
};
// The answer to one request. Fields other than ok/error are meaningful per request type
// (see protocol.md): Join → integer = membership token; KvGet → found + value; KvAdd,
// KvDelete, KvNumKeys → integer; KvCompareSet → value.
struct Reply {
  uint32_t request_id = 0;
  bool ok = true;
  std::string error;
  bool found = false;
  std::string value;
  int64_t integer = 0;
};
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
};
struct RestartRequested {
  uint64_t round = 0;  // the round that ends
  RestartReason reason = RestartReason::kMemberLost;
  std::string report;  // opaque: the worker-failure report, or a sentence for other reasons
};
struct JobFailed {
  std::string reason;  // one sentence for humans
  std::string report;  // opaque: the job's first worker-failure report, when there is one
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

using ServerMessage = std::variant<HelloAck, Reply, RoundAssigned, RestartRequested, JobFailed,
                                   JobSucceeded, HeartbeatAck, ErrorMsg>;
// The decisions of a rendezvous that are pushed to members.
using Push = std::variant<RoundAssigned, RestartRequested, JobFailed, JobSucceeded>;

}  // namespace ddprun::rdzv
