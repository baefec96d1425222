// What the job's store reads from a TCPStore client: one connection's byte stream, in either
// dialect (its first bytes decide, as on the wire), split into queries by store/codec.h.
//
// Properties:
//  - the stream decodes to the same queries whether it arrives whole or in pieces (the pieces'
//    sizes come from the input's first byte), and a decoder that needs more bytes always asks
//    for more than it has (a connection never spins);
//  - every query re-encodes to exactly the bytes it was decoded from;
//  - tighter limits decode a prefix of the same queries, then refuse cleanly (kMalformed);
//  - applied to a StoreEngine with small limits, with a second client watching and waiting,
//    the engine agrees with a plain map model of c10d's semantics and stays within its limits.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "store/codec.h"
#include "store/engine.h"

using namespace ddprun;
using namespace ddprun::store;

namespace {

struct Decoded {
  Dialect dialect = Dialect::kUnknown;
  std::vector<Request> requests;
  std::vector<std::string> wire;  // each query's bytes
  bool refused = false;           // a malformed query ended the connection
};

bool same_request(const Request& a, const Request& b) {
  return a.op == b.op && a.keys == b.keys && a.values == b.values && a.delta == b.delta &&
         a.number == b.number;
}

// Decodes what `buffer` holds from `begin` on, as Connection::process_input does; returns the
// new begin. Sets `need` when the buffer must grow, `out.refused` on a malformed query.
size_t decode_buffered(const std::string& buffer, size_t begin, const CodecLimits& limits,
                       Decoded& out, size_t& need) {
  for (;;) {
    const auto rest = fuzz::as_bytes(std::string_view(buffer).substr(begin));
    if (out.dialect == Dialect::kUnknown) {
      const DialectProbe probe = detect_dialect(rest);
      if (probe.dialect == Dialect::kUnknown) {
        FUZZ_CHECK(probe.need > rest.size());
        need = begin + probe.need;
        return begin;
      }
      out.dialect = probe.dialect;
    }
    auto step = decode_request(rest, out.dialect, limits);
    if (!step) {
      FUZZ_CHECK(step.status().is_malformed());
      FUZZ_CHECK(!step.error_message().empty());
      out.refused = true;
      return begin;
    }
    if (!step->request) {
      FUZZ_CHECK(step->need > rest.size());  // otherwise the reader would wait for nothing
      need = begin + step->need;
      return begin;
    }
    FUZZ_CHECK(step->consumed > 0 && step->consumed <= rest.size());
    const std::string wire = buffer.substr(begin, step->consumed);
    FUZZ_CHECK(encode_request(*step->request, out.dialect) == wire);
    out.wire.push_back(wire);
    out.requests.push_back(std::move(*step->request));
    begin += step->consumed;
  }
}

Decoded decode_whole(std::string_view stream, const CodecLimits& limits) {
  Decoded out;
  size_t need = 0;
  decode_buffered(std::string(stream), 0, limits, out, need);
  return out;
}

// The same stream arriving in pieces of 1 to 97 bytes, the sizes a function of `seed`.
Decoded decode_in_pieces(std::string_view stream, uint8_t seed, const CodecLimits& limits) {
  Decoded out;
  std::string buffer;
  size_t begin = 0, need = 1, at = 0;
  for (uint32_t i = 0; at < stream.size() && !out.refused; ++i) {
    const size_t piece = 1 + ((seed + 1u) * 2654435761u * (i + 1)) % 97;
    buffer.append(stream.substr(at, piece));
    at += std::min(piece, stream.size() - at);
    if (buffer.size() < need) continue;
    begin = decode_buffered(buffer, begin, limits, out, need);
  }
  return out;
}

// A passive second client: it watches keys and waits on them, counting what it is told.
struct Observer final : StoreEngine::Client {
  int waits_done = 0;
  int events = 0;
  void wait_done() override { ++waits_done; }
  void key_changed(const WatchEvent&) override { ++events; }
};

// Applies one connection's queries to an engine, next to a map model of the plain keys.
class Replay {
 public:
  explicit Replay(StoreLimits limits) : limits_(limits), engine_(limits) {}
  ~Replay() {
    engine_.forget(client_);
    engine_.forget(observer_);
  }

  // False when the connection would be closed (a refused write, a bad add).
  bool apply(Request r) {
    if (r.op != Op::kCancelWait && engine_.has_pending_wait(client_)) engine_.cancel_wait(client_);
    if (!r.keys.empty() && watched_ < 4) {
      engine_.watch(observer_, r.keys[0]);
      ++watched_;
    }
    const bool ok = dispatch(r);
    FUZZ_CHECK(engine_.keys() <= limits_.max_keys);
    FUZZ_CHECK(engine_.bytes() <= limits_.max_total_bytes);
    FUZZ_CHECK(engine_.num_keys() == static_cast<int64_t>(model_.size()));
    FUZZ_CHECK(engine_.pending_waits() <= 2);
    return ok;
  }

 private:
  std::string model_get(const std::string& key) const {
    auto it = model_.find(key);
    return it == model_.end() ? std::string() : it->second;
  }

  bool dispatch(Request& r) {
    switch (r.op) {
      case Op::kSet:
        return write(engine_.set(r.keys[0], r.values[0]), {{r.keys[0], r.values[0]}});
      case Op::kAppend:
        return write(engine_.append(r.keys[0], r.values[0]),
                     {{r.keys[0], model_get(r.keys[0]) + r.values[0]}});
      case Op::kMultiSet: {
        std::map<std::string, std::string> after;
        for (size_t i = 0; i < r.keys.size(); ++i) after[r.keys[i]] = r.values[i];
        return write(engine_.multi_set(r.keys, r.values), after);
      }
      case Op::kCompareSet:
        return compare_set(r);
      case Op::kAdd:
        return add(r);
      case Op::kGet: {
        auto value = engine_.get(r.keys[0]);
        FUZZ_CHECK(value.value_or(std::string()) == model_get(r.keys[0]));
        FUZZ_CHECK(value.has_value() == (model_.count(r.keys[0]) == 1));
        return true;
      }
      case Op::kMultiGet:
        for (const auto& key : r.keys) FUZZ_CHECK(engine_.get(key).value_or("") == model_get(key));
        return true;
      case Op::kDeleteKey:
        FUZZ_CHECK(engine_.erase(r.keys[0]) == (model_.erase(r.keys[0]) == 1));
        return true;
      case Op::kWait:
        if (!waited_) {  // the observer waits on the first wait's keys too
          waited_ = true;
          engine_.wait(observer_, r.keys);
        }
        if (engine_.wait(client_, r.keys)) FUZZ_CHECK(!engine_.has_pending_wait(client_));
        return true;
      case Op::kCheck:
        engine_.check(r.keys);
        return true;
      case Op::kCancelWait:
        engine_.cancel_wait(client_);
        FUZZ_CHECK(!engine_.has_pending_wait(client_));
        return true;
      case Op::kWatchKey:
        engine_.watch(client_, r.keys[0]);
        return true;
      case Op::kQueuePush:
        if (!engine_.queue_push(r.keys[0], r.values[0])) return false;
        FUZZ_CHECK(engine_.queue_len(r.keys[0]) >= 1);
        return true;
      case Op::kQueuePop: {
        const int64_t before = engine_.queue_len(r.keys[0]);
        const StoreEngine::Popped popped = engine_.queue_pop(r.keys[0]);
        FUZZ_CHECK(popped.length_before == before);
        FUZZ_CHECK(popped.value.has_value() == (before > 0));
        return true;
      }
      case Op::kQueueLen:
        FUZZ_CHECK(engine_.queue_len(r.keys[0]) >= 0);
        return true;
      case Op::kListKeys:
        FUZZ_CHECK(engine_.list_keys().size() == model_.size());
        return true;
      case Op::kBarrier: {
        auto reached = engine_.barrier(client_, r.keys[0], r.delta);
        if (!reached) {
          FUZZ_CHECK(reached.status().is_refused() || reached.status().is_invalid_argument());
          return false;
        }
        const std::string count = engine_.get(r.keys[0]).value_or("");
        FUZZ_CHECK(*reached == (std::stoll(count) >= r.delta));
        FUZZ_CHECK(*reached != engine_.has_pending_wait(client_));
        model_[r.keys[0]] = count;
        return true;
      }
      case Op::kNumKeys:
      case Op::kValidate:
      case Op::kPing:
        return true;
    }
    return true;
  }

  // A write either happens as a whole (the model takes `after`) or is refused and changes
  // nothing the model can see.
  bool write(const Status& s, const std::map<std::string, std::string>& after) {
    if (!s) {
      FUZZ_CHECK(s.is_refused());
      return false;
    }
    for (const auto& [key, value] : after) model_[key] = value;
    for (const auto& [key, value] : after) FUZZ_CHECK(engine_.get(key) == value);
    return true;
  }

  bool compare_set(Request& r) {
    const std::string& key = r.keys[0];
    const std::string& expected = r.values[0];
    const std::string& desired = r.values[1];
    auto now = engine_.compare_set(key, expected, desired);
    if (!now) {
      FUZZ_CHECK(now.status().is_refused());
      return false;
    }
    auto it = model_.find(key);
    if (it == model_.end()) {
      FUZZ_CHECK(*now == (expected.empty() ? desired : expected));
      if (expected.empty()) model_[key] = desired;
    } else {
      if (it->second == expected) it->second = desired;
      FUZZ_CHECK(*now == it->second);
    }
    return true;
  }

  bool add(Request& r) {
    auto sum = engine_.add(r.keys[0], r.delta);
    if (!sum) {
      FUZZ_CHECK(sum.status().is_refused() || sum.status().is_invalid_argument());
      return false;
    }
    model_[r.keys[0]] = std::to_string(*sum);
    FUZZ_CHECK(engine_.get(r.keys[0]) == std::to_string(*sum));
    return true;
  }

  const StoreLimits limits_;
  StoreEngine engine_;
  Observer client_;  // the connection whose queries these are
  Observer observer_;
  std::map<std::string, std::string> model_;  // plain keys
  int watched_ = 0;
  bool waited_ = false;
};

CodecLimits tight_codec_limits() {
  CodecLimits limits;
  limits.max_key_bytes = 16;
  limits.max_value_bytes = 64;
  limits.max_keys_per_request = 4;
  limits.max_request_bytes = 128;
  return limits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t seed = data[0];
  const std::string_view stream = fuzz::as_text(data + 1, size - 1);

  const CodecLimits limits;
  const Decoded whole = decode_whole(stream, limits);
  const Decoded pieces = decode_in_pieces(stream, seed, limits);
  FUZZ_CHECK(pieces.refused == whole.refused);
  FUZZ_CHECK(pieces.wire == whole.wire);
  FUZZ_CHECK(pieces.dialect == whole.dialect);

  const Decoded tight = decode_whole(stream, tight_codec_limits());
  FUZZ_CHECK(tight.requests.size() <= whole.requests.size());
  for (size_t i = 0; i < tight.requests.size(); ++i) {
    FUZZ_CHECK(same_request(tight.requests[i], whole.requests[i]));
  }

  StoreLimits store_limits;
  store_limits.max_keys = 16;
  store_limits.max_total_bytes = 1024;
  Replay replay(store_limits);
  for (const Request& r : whole.requests) {
    if (!replay.apply(r)) break;  // the server closes the connection here
  }
  return 0;
}
