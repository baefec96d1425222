#include "rendezvous/wire/codec.h"

#include <algorithm>

#include <fmt/format.h>

#include "rendezvous/wire/byte_io.h"
#include "rendezvous/wire/record_codec.h"

namespace ddprun::rdzv {
namespace {

// The records messages carry are written and read by record_codec.h's overloads.
using detail::get;
using detail::get_entries;
using detail::put;
using detail::put_entries;

// Frame type bytes; client types are below 0x80, server types at or above.
enum Type : uint8_t {
  kHello = 0x01,
  kJoin = 0x02,
  kResume = 0x03,
  kHeartbeat = 0x04,
  kReportFailure = 0x05,
  kReportSuccess = 0x06,
  kLeave = 0x07,
  kProgress = 0x08,
  kProgressQuery = 0x09,
  kStatusQuery = 0x0a,
  kAuthProof = 0x0b,
  kHelloAck = 0x81,
  kReply = 0x82,
  kRoundAssigned = 0x83,
  kRestartRequested = 0x84,
  kJobFailed = 0x85,
  kJobSucceeded = 0x86,
  kHeartbeatAck = 0x87,
  kError = 0x88,
  kStatusReport = 0x89,
  kAuthChallenge = 0x8a,
  kRedirect = 0x8b,
};

// An excluded host in a StatusReport: four strings and two times.
constexpr size_t kMinExcludedHostBytes = 4 * 4 + 8 + 8;
// The fewest bytes one job's status takes (record_codec.h has the rest of such bounds).
constexpr size_t kMinJobStatusBytes = 4 + 1 + 8 + 4 * 5 + 4 + detail::kStragglerFindingBytes;
void put(ByteWriter& w, const Hello& m) {
  w.u8(kHello), w.u32(m.magic), w.u16(m.version), w.str(m.job_id), w.str(m.client_nonce);
}
void put(ByteWriter& w, const JoinMsg& m) {
  w.u8(kJoin), w.u32(m.request_id), put(w, m.node), put(w, m.job);
  w.u16(m.standby_port), w.u32(m.restarts_used), w.u32(m.survivors);
}
void put(ByteWriter& w, const ResumeMsg& m) {
  w.u8(kResume), w.u32(m.request_id), w.str(m.node_id), w.u64(m.token), w.u64(m.pushes_received);
}
void put(ByteWriter& w, const HeartbeatMsg& m) { w.u8(kHeartbeat), w.u64(m.pushes_received); }
void put(ByteWriter& w, const ReportFailureMsg& m) {
  w.u8(kReportFailure), w.u32(m.request_id), w.u64(m.round), w.str(m.failure_report);
  w.i32(m.exit_code), w.str(m.not_restartable);
}
void put(ByteWriter& w, const ReportSuccessMsg& m) {
  w.u8(kReportSuccess), w.u32(m.request_id), w.u64(m.round);
}
void put(ByteWriter& w, const LeaveMsg& m) {
  w.u8(kLeave), w.u32(m.request_id), w.str(m.exclude_reason);
}
void put(ByteWriter& w, const ProgressMsg& m) {
  w.u8(kProgress), w.u32(m.request_id), w.u64(m.round), w.u32(m.straggler_threshold_milli);
  put_entries(w, m.ranks);
}
void put(ByteWriter& w, const ProgressQueryMsg& m) { w.u8(kProgressQuery), w.u32(m.request_id); }
void put(ByteWriter& w, const StatusQuery& m) {
  w.u8(kStatusQuery), w.u32(m.magic), w.u16(m.version), w.str(m.client_nonce);
  w.str(m.release_host);
}
void put(ByteWriter& w, const AuthProofMsg& m) { w.u8(kAuthProof), w.str(m.proof); }
void put(ByteWriter& w, const HelloAck& m) { w.u8(kHelloAck), w.u16(m.version); }
void put(ByteWriter& w, const AuthChallenge& m) {
  w.u8(kAuthChallenge), w.str(m.server_nonce), w.str(m.server_proof);
}
void put(ByteWriter& w, const Reply& m) {
  w.u8(kReply), w.u32(m.request_id), w.u8(m.ok ? 1 : 0), w.str(m.error), w.i64(m.integer);
  w.str(m.payload);
}
void put(ByteWriter& w, const RoundAssigned& m) {
  w.u8(kRoundAssigned), w.str(m.job_id), w.u64(m.round), w.u32(m.group_rank);
  w.u32(m.group_world_size), w.u32(m.local_world_size), w.u32(m.rank_offset), w.u32(m.world_size);
  w.str(m.master_addr), w.u16(m.master_port), w.u32(m.restart_count), w.u32(m.max_restarts);
  w.str(m.successor_host), w.u16(m.successor_port);
}
void put(ByteWriter& w, const RestartRequested& m) {
  w.u8(kRestartRequested), w.u64(m.round), w.u8(static_cast<uint8_t>(m.reason));
  w.str(m.message), w.str(m.failure_report);
}
void put(ByteWriter& w, const JobFailed& m) {
  w.u8(kJobFailed), w.u8(static_cast<uint8_t>(m.reason)), w.str(m.message);
  w.str(m.failure_report), w.i32(m.exit_code);
}
void put(ByteWriter& w, const JobSucceeded& m) { w.u8(kJobSucceeded), w.u64(m.round); }
void put(ByteWriter& w, const HeartbeatAck&) { w.u8(kHeartbeatAck); }
void put(ByteWriter& w, const ErrorMsg& m) { w.u8(kError), w.str(m.message); }
void put(ByteWriter& w, const StatusReport& m) {
  w.u8(kStatusReport), w.u8(m.truncated ? 1 : 0), w.u32(static_cast<uint32_t>(m.jobs.size()));
  for (const JobStatus& j : m.jobs) put(w, j);
  w.u32(static_cast<uint32_t>(m.excluded_hosts.size()));
  for (const ExcludedHostStatus& h : m.excluded_hosts) {
    w.str(h.host), w.str(h.reason), w.str(h.job_id), w.str(h.node);
    w.i64(h.since_ms), w.i64(h.until_ms);
  }
}
void put(ByteWriter& w, const Redirect& m) { w.u8(kRedirect), w.str(m.host), w.u16(m.port); }

template <class Variant>
std::string encode_variant(const Variant& message) {
  std::string out(kFrameHeaderBytes, '\0');
  ByteWriter w(out);
  std::visit([&](const auto& m) { put(w, m); }, message);
  const auto len = static_cast<uint32_t>(out.size() - kFrameHeaderBytes);
  std::string header;
  ByteWriter(header).u32(len);
  out.replace(0, kFrameHeaderBytes, header);
  return out;
}

// Decoders: fill the struct from the reader; the caller checks r.at_end().
// Nonces and proofs are 32 bytes (security/challenge.h); anything longer is refused unread.
constexpr size_t kMaxAuthFieldBytes = 64;
bool get(ByteReader& r, const CodecLimits& l, Hello& m) {
  return r.u32(m.magic) && r.u16(m.version) && r.str(m.job_id, l.max_string_bytes) &&
         r.str(m.client_nonce, kMaxAuthFieldBytes);
}
bool get(ByteReader& r, const CodecLimits&, AuthProofMsg& m) {
  return r.str(m.proof, kMaxAuthFieldBytes);
}
bool get(ByteReader& r, const CodecLimits&, AuthChallenge& m) {
  return r.str(m.server_nonce, kMaxAuthFieldBytes) && r.str(m.server_proof, kMaxAuthFieldBytes);
}
bool get(ByteReader& r, const CodecLimits& l, JoinMsg& m) {
  return r.u32(m.request_id) && get(r, l, m.node) && get(r, l, m.job) && r.u16(m.standby_port) &&
         r.u32(m.restarts_used) && r.u32(m.survivors);
}
bool get(ByteReader& r, const CodecLimits& l, ResumeMsg& m) {
  return r.u32(m.request_id) && r.str(m.node_id, l.max_string_bytes) && r.u64(m.token) &&
         r.u64(m.pushes_received);
}
bool get(ByteReader& r, const CodecLimits&, HeartbeatMsg& m) { return r.u64(m.pushes_received); }
bool get(ByteReader& r, const CodecLimits& l, ReportFailureMsg& m) {
  return r.u32(m.request_id) && r.u64(m.round) && r.str(m.failure_report, l.max_string_bytes) &&
         r.i32(m.exit_code) && r.str(m.not_restartable, l.max_string_bytes);
}
bool get(ByteReader& r, const CodecLimits&, ReportSuccessMsg& m) {
  return r.u32(m.request_id) && r.u64(m.round);
}
bool get(ByteReader& r, const CodecLimits& l, LeaveMsg& m) {
  return r.u32(m.request_id) && r.str(m.exclude_reason, l.max_string_bytes);
}
bool get(ByteReader& r, const CodecLimits& l, ProgressMsg& m) {
  return r.u32(m.request_id) && r.u64(m.round) && r.u32(m.straggler_threshold_milli) &&
         get_entries(r, l, m.ranks);
}
bool get(ByteReader& r, const CodecLimits&, ProgressQueryMsg& m) { return r.u32(m.request_id); }
bool get(ByteReader& r, const CodecLimits& l, StatusQuery& m) {
  // An excluded host is whatever precedes an agent's pid in its node id: as long as a string.
  return r.u32(m.magic) && r.u16(m.version) && r.str(m.client_nonce, kMaxAuthFieldBytes) &&
         r.str(m.release_host, l.max_string_bytes);
}
bool get(ByteReader& r, const CodecLimits&, HelloAck& m) { return r.u16(m.version); }
bool get(ByteReader& r, const CodecLimits& l, Reply& m) {
  uint8_t ok = 0;
  bool good = r.u32(m.request_id) && r.u8(ok) && r.str(m.error, l.max_string_bytes) &&
              r.i64(m.integer) && r.str(m.payload, l.max_frame_bytes);
  m.ok = ok != 0;
  return good && ok <= 1;
}
bool get(ByteReader& r, const CodecLimits& l, RoundAssigned& m) {
  return r.str(m.job_id, l.max_string_bytes) && r.u64(m.round) && r.u32(m.group_rank) &&
         r.u32(m.group_world_size) && r.u32(m.local_world_size) && r.u32(m.rank_offset) &&
         r.u32(m.world_size) && r.str(m.master_addr, l.max_string_bytes) && r.u16(m.master_port) &&
         r.u32(m.restart_count) && r.u32(m.max_restarts) &&
         r.str(m.successor_host, l.max_string_bytes) && r.u16(m.successor_port);
}
bool get(ByteReader& r, const CodecLimits& l, RestartRequested& m) {
  uint8_t reason = 0;
  bool good = r.u64(m.round) && r.u8(reason) && r.str(m.message, l.max_string_bytes) &&
              r.str(m.failure_report, l.max_string_bytes);
  m.reason = static_cast<RestartReason>(reason);
  return good && reason >= 1 && reason <= 3;
}
bool get(ByteReader& r, const CodecLimits& l, JobFailed& m) {
  uint8_t reason = 0;
  bool good = r.u8(reason) && r.str(m.message, l.max_string_bytes) &&
              r.str(m.failure_report, l.max_string_bytes) && r.i32(m.exit_code);
  m.reason = static_cast<JobFailureReason>(reason);
  return good && reason >= 1 && reason <= 4;
}
bool get(ByteReader& r, const CodecLimits&, JobSucceeded& m) { return r.u64(m.round); }
bool get(ByteReader& r, const CodecLimits& l, ErrorMsg& m) {
  return r.str(m.message, l.max_string_bytes);
}
bool get(ByteReader& r, const CodecLimits& l, StatusReport& m) {
  uint8_t truncated = 0;
  uint32_t jobs = 0;
  if (!r.u8(truncated) || truncated > 1 || !r.u32(jobs) ||
      !r.count_fits(jobs, kMinJobStatusBytes)) {
    return false;
  }
  m.truncated = truncated == 1;
  m.jobs.resize(jobs);
  for (JobStatus& j : m.jobs) {
    if (!get(r, l, j)) return false;
  }
  uint32_t excluded = 0;
  if (!r.u32(excluded) || !r.count_fits(excluded, kMinExcludedHostBytes)) return false;
  m.excluded_hosts.resize(excluded);
  for (ExcludedHostStatus& h : m.excluded_hosts) {
    if (!r.str(h.host, l.max_string_bytes) || !r.str(h.reason, l.max_string_bytes) ||
        !r.str(h.job_id, l.max_string_bytes) || !r.str(h.node, l.max_string_bytes) ||
        !r.i64(h.since_ms) || !r.i64(h.until_ms)) {
      return false;
    }
  }
  return true;
}
// A host name is at most 253 bytes; anything longer is refused unread.
constexpr size_t kMaxHostBytes = 255;
bool get(ByteReader& r, const CodecLimits&, Redirect& m) {
  // A redirect to port 0 cannot be followed; no host (no leader yet) comes with port 0.
  return r.str(m.host, kMaxHostBytes) && r.u16(m.port) && (m.host.empty() == (m.port == 0));
}
template <class M>
bool get(ByteReader&, const CodecLimits&, M&) {  // empty messages
  return true;
}

template <class Variant, class M>
Result<Variant> finish(ByteReader& r, const CodecLimits& l, M m, const char* name) {
  if (!get(r, l, m)) return Status::malformed(fmt::format("malformed {} frame", name));
  if (!r.at_end()) return Status::malformed(fmt::format("{} frame has trailing bytes", name));
  return Variant(std::move(m));
}

}  // namespace

const char* to_string(JobFailureReason reason) {
  switch (reason) {
    case JobFailureReason::kRestartsExhausted:
      return "restarts_exhausted";
    case JobFailureReason::kTooFewNodes:
      return "too_few_nodes";
    case JobFailureReason::kExitBarrierTimeout:
      return "exit_barrier_timeout";
    case JobFailureReason::kNotRestartable:
      return "not_restartable";
  }
  return "unknown";
}

const char* to_string(JobPhase phase) {
  switch (phase) {
    case JobPhase::kNoRound:
      return "no_round";
    case JobPhase::kGathering:
      return "gathering";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kSucceeded:
      return "succeeded";
    case JobPhase::kFailed:
      return "failed";
  }
  return "unknown";
}

const char* to_string(NodePhase phase) {
  switch (phase) {
    case NodePhase::kPending:
      return "pending";
    case NodePhase::kStandby:
      return "standby";
    case NodePhase::kMember:
      return "member";
    case NodePhase::kIdle:
      return "idle";
  }
  return "unknown";
}

const char* to_string(RestartReason reason) {
  switch (reason) {
    case RestartReason::kScaleUp:
      return "scale_up";
    case RestartReason::kMemberLost:
      return "member_lost";
    case RestartReason::kWorkerFailure:
      return "worker_failure";
  }
  return "unknown";
}

Result<uint32_t> decode_frame_length(std::span<const uint8_t, kFrameHeaderBytes> header,
                                     const CodecLimits& limits) {
  uint32_t len = 0;
  ByteReader(header).u32(len);
  if (len == 0) return Status::malformed("empty frame");
  if (len > limits.max_frame_bytes) {
    return Status::malformed(fmt::format("frame of {} bytes exceeds the limit of {} bytes", len,
                                         limits.max_frame_bytes));
  }
  return len;
}

std::string encode_frame(const ClientMessage& message) { return encode_variant(message); }
std::string encode_frame(const ServerMessage& message) { return encode_variant(message); }

Result<ClientMessage> decode_client_message(std::span<const uint8_t> body,
                                            const CodecLimits& limits) {
  ByteReader r(body);
  uint8_t type = 0;
  if (!r.u8(type)) return Status::malformed("empty frame");
  using V = ClientMessage;
  switch (type) {
    case kHello:
      return finish<V>(r, limits, Hello{}, "Hello");
    case kJoin:
      return finish<V>(r, limits, JoinMsg{}, "Join");
    case kResume:
      return finish<V>(r, limits, ResumeMsg{}, "Resume");
    case kHeartbeat:
      return finish<V>(r, limits, HeartbeatMsg{}, "Heartbeat");
    case kReportFailure:
      return finish<V>(r, limits, ReportFailureMsg{}, "ReportFailure");
    case kReportSuccess:
      return finish<V>(r, limits, ReportSuccessMsg{}, "ReportSuccess");
    case kLeave:
      return finish<V>(r, limits, LeaveMsg{}, "Leave");
    case kProgress:
      return finish<V>(r, limits, ProgressMsg{}, "Progress");
    case kProgressQuery:
      return finish<V>(r, limits, ProgressQueryMsg{}, "ProgressQuery");
    case kStatusQuery:
      return finish<V>(r, limits, StatusQuery{}, "StatusQuery");
    case kAuthProof:
      return finish<V>(r, limits, AuthProofMsg{}, "AuthProof");
    default:
      break;
  }
  return Status::malformed(fmt::format("unknown client frame type 0x{:02x}", type));
}

Result<ServerMessage> decode_server_message(std::span<const uint8_t> body,
                                            const CodecLimits& limits) {
  ByteReader r(body);
  uint8_t type = 0;
  if (!r.u8(type)) return Status::malformed("empty frame");
  using V = ServerMessage;
  switch (type) {
    case kHelloAck:
      return finish<V>(r, limits, HelloAck{}, "HelloAck");
    case kReply:
      return finish<V>(r, limits, Reply{}, "Reply");
    case kRoundAssigned:
      return finish<V>(r, limits, RoundAssigned{}, "RoundAssigned");
    case kRestartRequested:
      return finish<V>(r, limits, RestartRequested{}, "RestartRequested");
    case kJobFailed:
      return finish<V>(r, limits, JobFailed{}, "JobFailed");
    case kJobSucceeded:
      return finish<V>(r, limits, JobSucceeded{}, "JobSucceeded");
    case kHeartbeatAck:
      return finish<V>(r, limits, HeartbeatAck{}, "HeartbeatAck");
    case kError:
      return finish<V>(r, limits, ErrorMsg{}, "Error");
    case kStatusReport:
      return finish<V>(r, limits, StatusReport{}, "StatusReport");
    case kAuthChallenge:
      return finish<V>(r, limits, AuthChallenge{}, "AuthChallenge");
    case kRedirect:
      return finish<V>(r, limits, Redirect{}, "Redirect");
    default:
      break;
  }
  return Status::malformed(fmt::format("unknown server frame type 0x{:02x}", type));
}

namespace {
template <class R, class F>
R decode_whole(std::string_view frame, const CodecLimits& limits, F decode_body) {
  if (frame.size() < kFrameHeaderBytes) return Status::malformed("truncated frame header");
  const auto* p = reinterpret_cast<const uint8_t*>(frame.data());
  auto len = decode_frame_length(std::span<const uint8_t, kFrameHeaderBytes>(p, 4), limits);
  if (!len) return len.status();
  if (frame.size() - kFrameHeaderBytes != *len) {
    return Status::malformed(fmt::format("frame length {} does not match the {} bytes present",
                                         *len, frame.size() - kFrameHeaderBytes));
  }
  return decode_body(std::span<const uint8_t>(p + kFrameHeaderBytes, *len), limits);
}
}  // namespace

Result<ClientMessage> decode_client_frame(std::string_view frame, const CodecLimits& limits) {
  return decode_whole<Result<ClientMessage>>(frame, limits, decode_client_message);
}

Result<ServerMessage> decode_server_frame(std::string_view frame, const CodecLimits& limits) {
  return decode_whole<Result<ServerMessage>>(frame, limits, decode_server_message);
}

const char* message_name(const ClientMessage& message) {
  static constexpr const char* kNames[] = {
      "Hello", "Join",     "Resume",        "Heartbeat",   "ReportFailure", "ReportSuccess",
      "Leave", "Progress", "ProgressQuery", "StatusQuery", "AuthProof"};
  static_assert(std::size(kNames) == std::variant_size_v<ClientMessage>);
  return kNames[message.index()];
}

}  // namespace ddprun::rdzv
