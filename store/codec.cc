#include "store/codec.h"

#include <array>
#include <cassert>

#include <fmt/format.h>

namespace ddprun::store {
namespace {

// Wire type byte → Op, per dialect (the index is the byte). Pinned from PyTorch's sources:
// legacy = TCPStore.cpp up to 2.0 (1.13 stops at DELETE_KEY), validated = TCPStoreBackend.hpp
// of 2.x up to LIST_KEYS and BARRIER (2.15; earlier 2.x releases send a prefix of it).
constexpr std::array kLegacyOps = {Op::kSet,       Op::kCompareSet, Op::kGet,      Op::kAdd,
                                   Op::kCheck,     Op::kWait,       Op::kNumKeys,  Op::kWatchKey,
                                   Op::kDeleteKey, Op::kAppend,     Op::kMultiGet, Op::kMultiSet,
                                   Op::kCancelWait};
constexpr std::array kValidatedOps = {
    Op::kValidate, Op::kSet,      Op::kCompareSet, Op::kGet,       Op::kAdd,
    Op::kCheck,    Op::kWait,     Op::kNumKeys,    Op::kDeleteKey, Op::kAppend,
    Op::kMultiGet, Op::kMultiSet, Op::kCancelWait, Op::kPing,      Op::kQueuePush,
    Op::kQueuePop, Op::kQueueLen, Op::kListKeys,   Op::kBarrier};

std::optional<Op> op_from_wire(uint8_t type, Dialect dialect) {
  if (dialect == Dialect::kLegacy && type < kLegacyOps.size()) return kLegacyOps[type];
  if (dialect == Dialect::kValidated && type < kValidatedOps.size()) return kValidatedOps[type];
  return std::nullopt;
}

const char* dialect_name(Dialect dialect) {
  switch (dialect) {
    case Dialect::kLegacy:
      return "legacy (torch 1.x-2.0)";
    case Dialect::kValidated:
      return "validated (torch 2.x)";
    default:
      return "unknown";
  }
}

void put_le(std::string& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void put_bytes(std::string& out, std::string_view bytes) {
  put_le(out, bytes.size(), 8);
  out.append(bytes);
}

// Reads little-endian fields from the front of the buffered input. A read past the end sets
// `need` (more bytes may still come); a limit breach sets `error` (they never fit). Either way
// the read returns false and every later read fails too.
class Parser {
 public:
  Parser(std::span<const uint8_t> in, const CodecLimits& limits) : in_(in), limits_(limits) {}

  void set_query(const char* name) { query_ = name; }
  bool stopped() const { return need_ != 0 || !error_.ok(); }
  size_t pos() const { return pos_; }
  size_t need() const { return need_; }
  const Status& error() const { return error_; }

  bool u8(uint8_t& v) { return le(v); }
  bool u32(uint32_t& v) { return le(v); }
  bool u64(uint64_t& v) { return le(v); }
  bool i64(int64_t& v) {
    uint64_t u = 0;
    if (!le(u)) return false;
    v = static_cast<int64_t>(u);
    return true;
  }

  // A u64 length, then that many bytes; the length is checked against `max` first.
  bool bytes(std::string& out, uint64_t max, const char* what) {
    uint64_t len = 0;
    if (!u64(len)) return false;
    if (len > max) {
      return fail(fmt::format("{} of {} bytes is above the limit of {}", what, len, max));
    }
    if (!available(len)) return false;
    out.assign(reinterpret_cast<const char*>(in_.data() + pos_), len);
    pos_ += len;
    return true;
  }
  bool key(std::string& out) { return bytes(out, limits_.max_key_bytes, "a key"); }
  bool value(std::string& out) { return bytes(out, limits_.max_value_bytes, "a value"); }

  // A u64 count of keys, checked against max_keys_per_request.
  bool count(uint64_t& n) {
    if (!u64(n)) return false;
    if (n > limits_.max_keys_per_request) {
      return fail(
          fmt::format("{} keys are above the limit of {}", n, limits_.max_keys_per_request));
    }
    return true;
  }
  // Capacity to reserve for `n` elements of at least 8 bytes each: never more than could fit
  // in the bytes already here, so a large count costs nothing until its bytes arrive.
  size_t reserve_for(uint64_t n) const {
    const uint64_t fit = (in_.size() - pos_) / 8;
    return static_cast<size_t>(n < fit ? n : fit);
  }

 private:
  template <class T>
  bool le(T& v) {
    if (!available(sizeof(T))) return false;
    uint64_t acc = 0;
    for (size_t i = 0; i < sizeof(T); ++i) acc |= uint64_t{in_[pos_ + i]} << (8 * i);
    v = static_cast<T>(acc);
    pos_ += sizeof(T);
    return true;
  }
  bool available(uint64_t n) {
    if (stopped()) return false;
    if (n > limits_.max_request_bytes || pos_ + n > limits_.max_request_bytes) {
      return fail(
          fmt::format("the query is larger than the limit of {} bytes", limits_.max_request_bytes));
    }
    if (pos_ + n > in_.size()) {
      need_ = pos_ + static_cast<size_t>(n);
      return false;
    }
    return true;
  }
  bool fail(std::string why) {
    error_ = Status::malformed(fmt::format("malformed {}: {}", query_, why));
    return false;
  }

  std::span<const uint8_t> in_;
  const CodecLimits& limits_;
  const char* query_ = "query";
  size_t pos_ = 0;
  size_t need_ = 0;
  Status error_;
};

void parse_keys(Parser& p, Request& r) {
  uint64_t n = 0;
  if (!p.count(n)) return;
  r.keys.reserve(p.reserve_for(n));
  for (uint64_t i = 0; i < n && !p.stopped(); ++i) p.key(r.keys.emplace_back());
}

void parse_multi_set(Parser& p, Request& r) {
  uint64_t n = 0;
  if (!p.count(n)) return;
  r.keys.reserve(p.reserve_for(n));
  r.values.reserve(p.reserve_for(n));
  for (uint64_t i = 0; i < n && !p.stopped(); ++i) {
    if (p.key(r.keys.emplace_back())) p.value(r.values.emplace_back());
  }
}

void parse_arguments(Parser& p, Request& r) {
  switch (r.op) {
    case Op::kValidate:
    case Op::kPing:
      p.u32(r.number);
      return;
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      if (p.key(r.keys.emplace_back())) p.value(r.values.emplace_back());
      return;
    case Op::kCompareSet:
      if (p.key(r.keys.emplace_back()) && p.value(r.values.emplace_back())) {
        p.value(r.values.emplace_back());
      }
      return;
    case Op::kAdd:
    case Op::kBarrier:
      if (p.key(r.keys.emplace_back())) p.i64(r.delta);
      return;
    case Op::kGet:
    case Op::kWatchKey:
    case Op::kDeleteKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      p.key(r.keys.emplace_back());
      return;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      return parse_keys(p, r);
    case Op::kMultiSet:
      return parse_multi_set(p, r);
    case Op::kNumKeys:
    case Op::kCancelWait:
    case Op::kListKeys:
      return;
  }
}

}  // namespace

const char* op_name(Op op) {
  static constexpr std::array<const char*, kOpCount> kNames = {
      "validate", "set",        "compare_set", "get",       "add",       "check",     "wait",
      "num_keys", "watch_key",  "delete_key",  "append",    "multi_get", "multi_set", "cancel_wait",
      "ping",     "queue_push", "queue_pop",   "queue_len", "list_keys", "barrier"};
  return kNames[static_cast<size_t>(op)];
}

std::optional<uint8_t> wire_type(Op op, Dialect dialect) {
  auto find = [op](const auto& table) -> std::optional<uint8_t> {
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i] == op) return static_cast<uint8_t>(i);
    return std::nullopt;
  };
  if (dialect == Dialect::kLegacy) return find(kLegacyOps);
  if (dialect == Dialect::kValidated) return find(kValidatedOps);
  return std::nullopt;
}

DialectProbe detect_dialect(std::span<const uint8_t> first_bytes) {
  if (first_bytes.empty()) return {Dialect::kUnknown, 1};
  // Byte 0 opens both VALIDATE (2.x) and SET (legacy). A legacy SET continues with a u64 key
  // length whose low half would have to equal the magic (a key of about 1 GiB, above any
  // limit), so the magic decides.
  if (first_bytes[0] != 0) return {Dialect::kLegacy, 0};
  if (first_bytes.size() < 5) return {Dialect::kUnknown, 5};
  uint32_t magic = 0;
  for (size_t i = 0; i < 4; ++i) magic |= uint32_t{first_bytes[1 + i]} << (8 * i);
  return {magic == kValidationMagic ? Dialect::kValidated : Dialect::kLegacy, 0};
}

Result<DecodeStep> decode_request(std::span<const uint8_t> in, Dialect dialect,
                                  const CodecLimits& limits) {
  assert(dialect != Dialect::kUnknown && "decode_request needs a dialect");
  Parser p(in, limits);
  uint8_t type = 0;
  if (!p.u8(type)) return DecodeStep{std::nullopt, 0, p.need()};
  const std::optional<Op> op = op_from_wire(type, dialect);
  if (!op) {
    return Status::malformed(
        fmt::format("unknown query type {} in the {} dialect", type, dialect_name(dialect)));
  }
  Request request;
  request.op = *op;
  p.set_query(op_name(*op));
  parse_arguments(p, request);
  if (!p.error().ok()) return p.error();
  if (p.need() != 0) return DecodeStep{std::nullopt, 0, p.need()};
  return DecodeStep{std::move(request), p.pos(), 0};
}

std::string encode_request(const Request& r, Dialect dialect) {
  const std::optional<uint8_t> type = wire_type(r.op, dialect);
  assert(type && "query not in this dialect");
  std::string out(1, static_cast<char>(type.value_or(0xff)));
  switch (r.op) {
    case Op::kValidate:
    case Op::kPing:
      put_le(out, r.number, 4);
      break;
    case Op::kAdd:
    case Op::kBarrier:
      put_bytes(out, r.keys.at(0));
      put_le(out, static_cast<uint64_t>(r.delta), 8);
      break;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      put_le(out, r.keys.size(), 8);
      for (const auto& k : r.keys) put_bytes(out, k);
      break;
    case Op::kMultiSet:
      put_le(out, r.keys.size(), 8);
      for (size_t i = 0; i < r.keys.size(); ++i) {
        put_bytes(out, r.keys[i]);
        put_bytes(out, r.values.at(i));
      }
      break;
    default:  // key first (if any), then the values in order
      for (const auto& k : r.keys) put_bytes(out, k);
      for (const auto& v : r.values) put_bytes(out, v);
      break;
  }
  return out;
}

std::string encode_value(std::string_view value) {
  std::string out;
  out.reserve(8 + value.size());
  put_bytes(out, value);
  return out;
}

std::string encode_i64(int64_t value) {
  std::string out;
  put_le(out, static_cast<uint64_t>(value), 8);
  return out;
}

std::string encode_u32(uint32_t value) {
  std::string out;
  put_le(out, value, 4);
  return out;
}

std::string encode_check(CheckReply reply) { return std::string(1, static_cast<char>(reply)); }

std::string encode_wait(WaitReply reply) { return std::string(1, static_cast<char>(reply)); }

std::string encode_keys(const std::vector<std::string>& keys) {
  std::string out;
  put_le(out, keys.size(), 8);
  for (const auto& key : keys) put_bytes(out, key);
  return out;
}

std::string encode_queue_pop(int64_t length_before, std::optional<std::string_view> value) {
  std::string out = encode_i64(length_before);
  if (value) put_bytes(out, *value);
  return out;
}

std::string encode_watch_registered() {
  return std::string(1, static_cast<char>(WatchKind::kRegistered));
}

std::string encode_watch_event(const WatchEvent& event) {
  std::string out(1, static_cast<char>(event.kind));
  put_bytes(out, event.key);
  put_bytes(out, event.old_value);
  put_bytes(out, event.new_value);
  return out;
}

}  // namespace ddprun::store
