#include "rendezvous/state/etcd/etcd_json.h"

#include <charconv>

#include <fmt/format.h>
#include <boost/beast/core/detail/base64.hpp>

namespace ddprun::rdzv::state::etcd {
namespace {

using nlohmann::json;
namespace b64 = boost::beast::detail::base64;

// A 64-bit field: the gateway writes it as a string, a hand-written peer may use a number,
// and a field at 0 is absent.
Result<int64_t> int_field(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return int64_t{0};
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const auto& text = it->get_ref<const std::string&>();
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && end == text.data() + text.size()) return value;
  }
  return Status::malformed(
      fmt::format("etcd answer: field '{}' is not an integer: {}", name, it->dump()));
}

Result<std::string> bytes_field(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string()) {
    return Status::malformed(fmt::format("etcd answer: field '{}' is not a string", name));
  }
  auto decoded = base64_decode(it->get_ref<const std::string&>());
  if (!decoded) return decoded.status().with_context(fmt::format("etcd answer: field '{}'", name));
  return decoded;
}

const json& object_field(const json& object, const char* name) {
  static const json empty = json::object();
  auto it = object.find(name);
  return it != object.end() && it->is_object() ? *it : empty;
}

Status require_object(const json& body, const char* what) {
  if (body.is_object()) return Status();
  return Status::malformed(fmt::format("etcd answer to {} is not a JSON object", what));
}

Result<KeyValue> parse_kv(const json& j) {
  KeyValue kv;
  auto key = bytes_field(j, "key");
  auto value = bytes_field(j, "value");
  auto create = int_field(j, "create_revision");
  auto mod = int_field(j, "mod_revision");
  auto version = int_field(j, "version");
  auto lease = int_field(j, "lease");
  for (const Status& s : {key.status(), value.status(), create.status(), mod.status(),
                          version.status(), lease.status()}) {
    if (!s) return s;
  }
  return KeyValue{*key, *value, *create, *mod, *version, *lease};
}

const char* target_name(Compare::Target target) {
  switch (target) {
    case Compare::Target::kCreateRevision:
      return "CREATE";
    case Compare::Target::kModRevision:
      return "MOD";
    case Compare::Target::kVersion:
      return "VERSION";
    case Compare::Target::kValue:
      return "VALUE";
    case Compare::Target::kLease:
      return "LEASE";
  }
  return "VERSION";
}

json to_json(const Compare& c) {
  json j = {{"key", base64_encode(c.key)}, {"target", target_name(c.target)}, {"result", "EQUAL"}};
  const std::string number = std::to_string(c.number);
  switch (c.target) {
    case Compare::Target::kCreateRevision:
      j["create_revision"] = number;
      break;
    case Compare::Target::kModRevision:
      j["mod_revision"] = number;
      break;
    case Compare::Target::kVersion:
      j["version"] = number;
      break;
    case Compare::Target::kValue:
      j["value"] = base64_encode(c.value);
      break;
    case Compare::Target::kLease:
      j["lease"] = number;
      break;
  }
  return j;
}

json to_json(const RequestOp& op) {
  return std::visit(
      [](const auto& r) -> json {
        using R = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<R, RangeRequest>) return {{"request_range", to_json(r)}};
        if constexpr (std::is_same_v<R, PutRequest>) return {{"request_put", to_json(r)}};
        if constexpr (std::is_same_v<R, DeleteRangeRequest>) {
          return {{"request_delete_range", to_json(r)}};
        }
      },
      op);
}

Result<ResponseOp> parse_response_op(const json& j) {
  if (!j.is_object()) return Status::malformed("etcd answer: a txn response is not an object");
  if (auto it = j.find("response_range"); it != j.end()) {
    auto r = parse_range(*it);
    if (!r) return r.status();
    return ResponseOp(std::move(*r));
  }
  if (auto it = j.find("response_put"); it != j.end()) {
    auto r = parse_put(*it);
    if (!r) return r.status();
    return ResponseOp(*r);
  }
  if (auto it = j.find("response_delete_range"); it != j.end()) {
    auto r = parse_delete_range(*it);
    if (!r) return r.status();
    return ResponseOp(*r);
  }
  return Status::malformed("etcd answer: unknown txn response " + j.dump());
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out(b64::encoded_size(bytes.size()), '\0');
  out.resize(b64::encode(out.data(), bytes.data(), bytes.size()));
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return Status::malformed(
        fmt::format("bad base64 (length {} is not a multiple of 4)", text.size()));
  }
  std::string out(b64::decoded_size(text.size()), '\0');
  auto [written, read] = b64::decode(out.data(), text.data(), text.size());
  // Beast's decoder stops at the first character outside the alphabet; padding ends it too.
  size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') {
    ++padding;
  }
  if (read + padding < text.size()) {
    return Status::malformed(fmt::format("bad base64 character at offset {}", read));
  }
  out.resize(written);
  return out;
}

std::string prefix_range_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key (etcd's "\0" range end)
}

json to_json(const RangeRequest& r) {
  json j = {{"key", base64_encode(r.key)}};
  if (!r.range_end.empty()) j["range_end"] = base64_encode(r.range_end);
  if (r.limit) j["limit"] = std::to_string(r.limit);
  if (r.revision) j["revision"] = std::to_string(r.revision);
  return j;
}

json to_json(const PutRequest& r) {
  json j = {{"key", base64_encode(r.key)}, {"value", base64_encode(r.value)}};
  if (r.lease) j["lease"] = std::to_string(r.lease);
  return j;
}

json to_json(const DeleteRangeRequest& r) {
  json j = {{"key", base64_encode(r.key)}};
  if (!r.range_end.empty()) j["range_end"] = base64_encode(r.range_end);
  return j;
}

json to_json(const TxnRequest& r) {
  json j = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const auto& c : r.compare) j["compare"].push_back(to_json(c));
  for (const auto& op : r.success) j["success"].push_back(to_json(op));
  for (const auto& op : r.failure) j["failure"].push_back(to_json(op));
  return j;
}

Result<RangeResponse> parse_range(const json& body) {
  if (Status s = require_object(body, "range"); !s) return s;
  RangeResponse r;
  auto revision = int_field(object_field(body, "header"), "revision");
  auto count = int_field(body, "count");
  if (!revision || !count) return !revision ? revision.status() : count.status();
  r.revision = *revision;
  r.count = *count;
  r.more = body.value("more", false);
  if (auto it = body.find("kvs"); it != body.end() && it->is_array()) {
    for (const auto& item : *it) {
      auto kv = parse_kv(item);
      if (!kv) return kv.status();
      r.kvs.push_back(std::move(*kv));
    }
  }
  return r;
}

Result<PutResponse> parse_put(const json& body) {
  if (Status s = require_object(body, "put"); !s) return s;
  auto revision = int_field(object_field(body, "header"), "revision");
  if (!revision) return revision.status();
  return PutResponse{*revision};
}

Result<DeleteRangeResponse> parse_delete_range(const json& body) {
  if (Status s = require_object(body, "delete"); !s) return s;
  auto revision = int_field(object_field(body, "header"), "revision");
  auto deleted = int_field(body, "deleted");
  if (!revision || !deleted) return !revision ? revision.status() : deleted.status();
  return DeleteRangeResponse{*revision, *deleted};
}

Result<TxnResponse> parse_txn(const json& body) {
  if (Status s = require_object(body, "txn"); !s) return s;
  TxnResponse r;
  auto revision = int_field(object_field(body, "header"), "revision");
  if (!revision) return revision.status();
  r.revision = *revision;
  r.succeeded = body.value("succeeded", false);
  if (auto it = body.find("responses"); it != body.end() && it->is_array()) {
    for (const auto& item : *it) {
      auto op = parse_response_op(item);
      if (!op) return op.status();
      r.responses.push_back(std::move(*op));
    }
  }
  return r;
}

Result<LeaseGrantResponse> parse_lease_grant(const json& body) {
  if (Status s = require_object(body, "lease grant"); !s) return s;
  if (auto it = body.find("error"); it != body.end() && it->is_string() && !it->empty()) {
    return Status::error("etcd refused the lease: " + it->get<std::string>());
  }
  auto id = int_field(body, "ID");
  auto ttl = int_field(body, "TTL");
  if (!id || !ttl) return !id ? id.status() : ttl.status();
  if (*id == 0) return Status::malformed("etcd answer to lease grant has no lease ID");
  return LeaseGrantResponse{*id, *ttl};
}

Result<int64_t> parse_lease_keepalive(const json& body) {
  if (Status s = require_object(body, "lease keep-alive"); !s) return s;
  if (body.contains("error")) return parse_error(200, body.dump());
  return int_field(object_field(body, "result"), "TTL");
}

Status parse_error(unsigned http_status, std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("code")) {
    std::string text(body.substr(0, 200));
    return Status::error(http_status >= 500 ? ErrorKind::kUnavailable : ErrorKind::kFailed,
                         fmt::format("etcd answered HTTP {}: {}", http_status, text));
  }
  const int code = j["code"].is_number_integer() ? j["code"].get<int>() : -1;
  std::string message = j.value("message", j.value("error", std::string("no message")));
  switch (code) {
    case kGrpcNotFound:
      return Status::not_found(message);
    case kGrpcUnavailable:
    case kGrpcDeadlineExceeded:
      return Status::unavailable(message);
    case 3:  // InvalidArgument
      return Status::invalid_argument(message);
    default:
      return Status::error(fmt::format("{} (gRPC code {})", message, code));
  }
}

}  // namespace ddprun::rdzv::state::etcd
