// The etcd v3 API as its HTTP/JSON gateway speaks it (etcd 3.4: POST /v3/kv/range, ...): the
// request bodies we send and the answers we read, as pure functions on JSON values. No I/O.
//
// The gateway's conventions (grpc-gateway over etcd's protobufs): keys and values are base64;
// 64-bit integers are JSON strings ("revision": "12"); fields at their default (0, false, an
// empty list) are left out; a streaming call (lease keep-alive) wraps its answer in "result";
// an error is {"error": "...", "code": <gRPC code>, "message": "..."} with an HTTP error status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace ddprun::rdzv::state::etcd {

std::string base64_encode(std::string_view bytes);
// Errors (kMalformed) on characters outside the alphabet or a bad length.
Result<std::string> base64_decode(std::string_view text);
// The range_end that selects every key starting with `prefix` (etcd's prefix convention:
// the prefix with its last byte incremented, dropping trailing 0xff bytes).
std::string prefix_range_end(std::string_view prefix);

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;  // 0: no lease
};

struct RangeRequest {
  std::string key;
  std::string range_end;  // empty: the single key `key`
  int64_t limit = 0;      // 0: no limit
  int64_t revision = 0;   // 0: the newest
};
struct RangeResponse {
  int64_t revision = 0;  // the store's revision when the range was served
  std::vector<KeyValue> kvs;
  bool more = false;  // a limit cut the answer short
  int64_t count = 0;
};

struct PutRequest {
  std::string key;
  std::string value;
  int64_t lease = 0;
};
struct DeleteRangeRequest {
  std::string key;
  std::string range_end;
};

// One comparison of a transaction, always "target(key) == operand".
struct Compare {
  enum class Target { kCreateRevision, kModRevision, kVersion, kValue, kLease };
  std::string key;
  Target target = Target::kCreateRevision;
  int64_t number = 0;  // the operand for every target but kValue
  std::string value;   // the operand for kValue
};
using RequestOp = std::variant<RangeRequest, PutRequest, DeleteRangeRequest>;
struct TxnRequest {
  std::vector<Compare> compare;
  std::vector<RequestOp> success;
  std::vector<RequestOp> failure;
};
struct PutResponse {
  int64_t revision = 0;
};
struct DeleteRangeResponse {
  int64_t revision = 0;
  int64_t deleted = 0;
};
using ResponseOp = std::variant<RangeResponse, PutResponse, DeleteRangeResponse>;
struct TxnResponse {
  int64_t revision = 0;
  bool succeeded = false;
  std::vector<ResponseOp> responses;  // one per op of the branch that ran
};

struct LeaseGrantResponse {
  int64_t id = 0;
  int64_t ttl_seconds = 0;  // as granted: etcd raises a TTL below its minimum
};

nlohmann::json to_json(const RangeRequest& request);
nlohmann::json to_json(const PutRequest& request);
nlohmann::json to_json(const DeleteRangeRequest& request);
nlohmann::json to_json(const TxnRequest& request);

// Parsers take the whole body of a 200 answer. Errors are kMalformed and say what was wrong.
Result<RangeResponse> parse_range(const nlohmann::json& body);
Result<PutResponse> parse_put(const nlohmann::json& body);
Result<DeleteRangeResponse> parse_delete_range(const nlohmann::json& body);
Result<TxnResponse> parse_txn(const nlohmann::json& body);
Result<LeaseGrantResponse> parse_lease_grant(const nlohmann::json& body);
// The remaining TTL in seconds after a keep-alive; 0 when the lease no longer exists.
Result<int64_t> parse_lease_keepalive(const nlohmann::json& body);

// gRPC status codes that the gateway passes on and that we decide by.
inline constexpr int kGrpcNotFound = 5;
inline constexpr int kGrpcUnavailable = 14;
inline constexpr int kGrpcDeadlineExceeded = 4;
// An error answer turned into a Status: its kind follows the gRPC code (NotFound → kNotFound,
// Unavailable/DeadlineExceeded → kUnavailable, InvalidArgument → kInvalidArgument, others
// kFailed); the message is etcd's. `http_status` is used when the body is not etcd's JSON.
Status parse_error(unsigned http_status, std::string_view body);

}  // namespace ddprun::rdzv::state::etcd
