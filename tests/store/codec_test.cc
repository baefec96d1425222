// The TCPStore codec on byte strings. The legacy sequences were captured from Debian's torch
// 1.13 Python client talking to torch's own server; the validated (torch 2.x) ones are pinned
// from PyTorch's TCPStore.cpp / TCPStoreBackend.hpp / TCPStoreLibUvBackend.cpp (2.6+), since no
// torch 2.x runs here. Malformed input of every kind is a clean error, never a crash.
#include "store/codec.h"

#include <random>

#include <gtest/gtest.h>

namespace ddprun::store {
namespace {

std::vector<uint8_t> hex(std::string_view text) {
  std::vector<uint8_t> out;
  std::string digits;
  for (char c : text)
    if (c != ' ') digits.push_back(c);
  for (size_t i = 0; i + 1 < digits.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  return out;
}

std::string hex_of(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

Request decode_one(const std::vector<uint8_t>& bytes, Dialect dialect) {
  auto step = decode_request(bytes, dialect, CodecLimits{});
  EXPECT_TRUE(step.ok()) << step.error_message();
  if (!step.ok() || !step->request) {
    ADD_FAILURE() << "no whole request in " << bytes.size() << " bytes";
    return {};
  }
  EXPECT_EQ(step->consumed, bytes.size());
  return *step->request;
}

TEST(StoreDialectTest, FirstBytesDecideTheDialect) {
  EXPECT_EQ(detect_dialect({}).need, 1u);
  const auto zero = hex("00");
  EXPECT_EQ(detect_dialect(zero).dialect, Dialect::kUnknown);
  EXPECT_EQ(detect_dialect(zero).need, 5u);
  EXPECT_EQ(detect_dialect(hex("00 ce f7 85 3c")).dialect, Dialect::kValidated);
  // A legacy SET: type 0, then a u64 key length.
  EXPECT_EQ(detect_dialect(hex("00 02 00 00 00 00 00 00 00")).dialect, Dialect::kLegacy);
  // torch 1.13's usual first query: ADD "init/" (type 3).
  EXPECT_EQ(detect_dialect(hex("03")).dialect, Dialect::kLegacy);
}

// Captured from torch 1.13's TCPStore("127.0.0.1", port, 2, False) against torch's server.
TEST(StoreCodecLegacyTest, Torch113QueriesDecode) {
  Request add =
      decode_one(hex("03 0500000000000000 696e69742f 0100000000000000"), Dialect::kLegacy);
  EXPECT_EQ(add.op, Op::kAdd);
  EXPECT_EQ(add.keys, std::vector<std::string>{"init/"});
  EXPECT_EQ(add.delta, 1);

  Request set = decode_one(hex("00 0200000000000000 2f6b 0200000000000000 7631"), Dialect::kLegacy);
  EXPECT_EQ(set.op, Op::kSet);
  EXPECT_EQ(set.keys[0], "/k");
  EXPECT_EQ(set.values, std::vector<std::string>{"v1"});

  Request wait = decode_one(hex("05 0100000000000000 0200000000000000 2f6b"), Dialect::kLegacy);
  EXPECT_EQ(wait.op, Op::kWait);
  EXPECT_EQ(wait.keys, std::vector<std::string>{"/k"});

  EXPECT_EQ(decode_one(hex("02 0200000000000000 2f6b"), Dialect::kLegacy).op, Op::kGet);
  Request cas =
      decode_one(hex("01 0200000000000000 2f6b 0200000000000000 7631 0200000000000000 7632"),
                 Dialect::kLegacy);
  EXPECT_EQ(cas.op, Op::kCompareSet);
  EXPECT_EQ(cas.values, (std::vector<std::string>{"v1", "v2"}));
  EXPECT_EQ(decode_one(hex("06"), Dialect::kLegacy).op, Op::kNumKeys);
  EXPECT_EQ(decode_one(hex("08 0200000000000000 2f6b"), Dialect::kLegacy).op, Op::kDeleteKey);
  EXPECT_EQ(decode_one(hex("07 0200000000000000 2f6b"), Dialect::kLegacy).op, Op::kWatchKey);
  // torch 2.0's additions to the legacy numbering.
  EXPECT_EQ(decode_one(hex("09 0100000000000000 61 0100000000000000 62"), Dialect::kLegacy).op,
            Op::kAppend);
  EXPECT_EQ(decode_one(hex("0c"), Dialect::kLegacy).op, Op::kCancelWait);
}

TEST(StoreCodecLegacyTest, RepliesMatchTorch113Bytes) {
  EXPECT_EQ(hex_of(encode_i64(1)), "0100000000000000");           // add
  EXPECT_EQ(hex_of(encode_wait(WaitReply::kStopWaiting)), "00");  // wait
  EXPECT_EQ(hex_of(encode_value("v1")), "02000000000000007631");  // get
  EXPECT_EQ(hex_of(encode_value("x")), "010000000000000078");     // compare_set
  EXPECT_EQ(hex_of(encode_check(CheckReply::kNotReady)), "01");   // check
  EXPECT_EQ(hex_of(encode_watch_registered()), "03");             // watch_key
  EXPECT_EQ(hex_of(encode_watch_event({WatchKind::kUpdated, "/k", "a", "bc"})),
            "00"
            "0200000000000000"
            "2f6b"
            "0100000000000000"
            "61"
            "0200000000000000"
            "6263");
}

// torch 2.x's client opening: TCPStore::validate() then ping() (nonce = getpid()), written
// back to back; the server answers only the PING, echoing the nonce.
TEST(StoreCodecValidatedTest, ValidateThenPingOpening) {
  const auto bytes = hex("00 cef7853c 0d 39300000");
  ASSERT_EQ(detect_dialect(bytes).dialect, Dialect::kValidated);
  auto first = decode_request(bytes, Dialect::kValidated, {});
  ASSERT_TRUE(first.ok() && first->request);
  EXPECT_EQ(first->request->op, Op::kValidate);
  EXPECT_EQ(first->request->number, kValidationMagic);
  EXPECT_EQ(first->consumed, 5u);
  auto second = decode_request(std::span(bytes).subspan(5), Dialect::kValidated, {});
  ASSERT_TRUE(second.ok() && second->request);
  EXPECT_EQ(second->request->op, Op::kPing);
  EXPECT_EQ(second->request->number, 12345u);
  EXPECT_EQ(hex_of(encode_u32(12345)), "39300000");
}

TEST(StoreCodecValidatedTest, EveryQueryTypeDecodes) {
  struct Case {
    const char* bytes;
    Op op;
  };
  const std::vector<Case> cases = {
      {"01 0200000000000000 2f6b 0100000000000000 76", Op::kSet},
      {"02 0200000000000000 2f6b 0000000000000000 0100000000000000 76", Op::kCompareSet},
      {"03 0200000000000000 2f6b", Op::kGet},
      {"04 0200000000000000 2f6b ffffffffffffffff", Op::kAdd},
      {"05 0100000000000000 0200000000000000 2f6b", Op::kCheck},
      {"06 0000000000000000", Op::kWait},
      {"07", Op::kNumKeys},
      {"08 0200000000000000 2f6b", Op::kDeleteKey},
      {"09 0200000000000000 2f6b 0100000000000000 76", Op::kAppend},
      {"0a 0100000000000000 0200000000000000 2f6b", Op::kMultiGet},
      {"0b 0100000000000000 0200000000000000 2f6b 0100000000000000 76", Op::kMultiSet},
      {"0c", Op::kCancelWait},
      {"0d 01000000", Op::kPing},
      {"0e 0200000000000000 2f71 0100000000000000 76", Op::kQueuePush},
      {"0f 0200000000000000 2f71", Op::kQueuePop},
      {"10 0200000000000000 2f71", Op::kQueueLen},
      // As torch 2.15's client sends them (captured from Store.list_keys and Store.barrier).
      {"11", Op::kListKeys},
      {"12 0600000000000000 2f6d796b6579 0200000000000000", Op::kBarrier},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.bytes);
    Request r = decode_one(hex(c.bytes), Dialect::kValidated);
    EXPECT_EQ(r.op, c.op);
    EXPECT_EQ(hex_of(encode_request(r, Dialect::kValidated)),
              hex_of(std::string(reinterpret_cast<const char*>(hex(c.bytes).data()),
                                 hex(c.bytes).size())));
  }
  EXPECT_EQ(decode_one(hex("04 0200000000000000 2f6b ffffffffffffffff"), Dialect::kValidated).delta,
            -1);
}

TEST(StoreCodecValidatedTest, RepliesMatchTorch2Bytes) {
  EXPECT_EQ(hex_of(encode_wait(WaitReply::kWaitCanceled)), "01");
  // LIST_KEYS as torch 2.15's own server answers it: a count, then each key.
  EXPECT_EQ(hex_of(encode_keys({"/bb", "/a"})),
            "0200000000000000"
            "0300000000000000"
            "2f6262"
            "0200000000000000"
            "2f61");
  EXPECT_EQ(hex_of(encode_queue_pop(0, std::nullopt)), "0000000000000000");
  EXPECT_EQ(hex_of(encode_queue_pop(2, "ab")),
            "0200000000000000"
            "0200000000000000"
            "6162");
}

TEST(StoreCodecTest, QueriesOutsideTheirDialectAreUnknown) {
  auto legacy_ping = decode_request(hex("0d 01000000"), Dialect::kLegacy, {});
  ASSERT_FALSE(legacy_ping.ok());
  EXPECT_TRUE(legacy_ping.status().is_malformed());
  EXPECT_NE(legacy_ping.error_message().find("unknown query type 13"), std::string::npos)
      << legacy_ping.error_message();
  EXPECT_FALSE(decode_request(hex("13"), Dialect::kValidated, {}).ok());
  EXPECT_FALSE(decode_request(hex("11"), Dialect::kLegacy, {}).ok());
  EXPECT_FALSE(decode_request(hex("ce f7 85 3c"), Dialect::kLegacy, {}).ok());
  EXPECT_FALSE(wire_type(Op::kWatchKey, Dialect::kValidated).has_value());
  EXPECT_FALSE(wire_type(Op::kPing, Dialect::kLegacy).has_value());
}

// Every proper prefix of a query asks for more bytes (never errors, never decodes early), and
// `need` always lies beyond what is there.
TEST(StoreCodecTest, TruncationAtEveryByteAsksForMore) {
  Request r{Op::kMultiSet, {"alpha", "b"}, {"one", ""}, 0, 0};
  for (Dialect d : {Dialect::kLegacy, Dialect::kValidated}) {
    const std::string whole = encode_request(r, d);
    const auto* data = reinterpret_cast<const uint8_t*>(whole.data());
    for (size_t len = 0; len < whole.size(); ++len) {
      auto step = decode_request(std::span(data, len), d, {});
      ASSERT_TRUE(step.ok()) << len << ": " << step.error_message();
      ASSERT_FALSE(step->request) << len;
      ASSERT_GT(step->need, len);
      ASSERT_LE(step->need, whole.size());
    }
    Request back = decode_one(std::vector<uint8_t>(data, data + whole.size()), d);
    EXPECT_EQ(back.keys, r.keys);
    EXPECT_EQ(back.values, r.values);
  }
}

TEST(StoreCodecTest, OversizedLengthsAreRefusedBeforeTheirBytesArrive) {
  CodecLimits limits;
  limits.max_key_bytes = 16;
  limits.max_value_bytes = 32;
  limits.max_keys_per_request = 4;
  // Only the length fields are present: the decision cannot depend on the bytes behind them.
  auto key = decode_request(hex("02 1100000000000000"), Dialect::kLegacy, limits);
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.error_message().find("malformed get: a key of 17 bytes"), std::string::npos)
      << key.error_message();
  auto value =
      decode_request(hex("00 0100000000000000 6b 2100000000000000"), Dialect::kLegacy, limits);
  ASSERT_FALSE(value.ok());
  EXPECT_NE(value.error_message().find("a value of 33 bytes"), std::string::npos);
  auto count = decode_request(hex("05 0500000000000000"), Dialect::kLegacy, limits);
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.error_message().find("5 keys are above the limit of 4"), std::string::npos);
  // A negative MULTI_SET count (torch sends it as i64) is an enormous u64.
  EXPECT_FALSE(decode_request(hex("0b ffffffffffffffff"), Dialect::kValidated, {}).ok());
  // A length near 2^64 must not overflow any arithmetic.
  EXPECT_FALSE(decode_request(hex("02 ffffffffffffffff"), Dialect::kLegacy, {}).ok());
}

TEST(StoreCodecTest, WholeQueryLimitCoversManySmallFields) {
  CodecLimits limits;
  limits.max_request_bytes = 64;
  Request r{Op::kCheck, std::vector<std::string>(8, "key"), {}, 0, 0};  // 1 + 8 + 8 * 11 bytes
  const std::string bytes = encode_request(r, Dialect::kLegacy);
  auto step =
      decode_request(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                     Dialect::kLegacy, limits);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.error_message().find("larger than the limit of 64 bytes"), std::string::npos);
}

TEST(StoreCodecTest, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  CodecLimits limits;
  limits.max_request_bytes = 4096;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> bytes(rng() % 64);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng() % 4 == 0 ? rng() : rng() % 18);
    for (Dialect d : {Dialect::kLegacy, Dialect::kValidated}) {
      auto step = decode_request(bytes, d, limits);
      if (step.ok() && step->request) ASSERT_LE(step->consumed, bytes.size());
      if (step.ok() && !step->request) ASSERT_GT(step->need, bytes.size());
    }
  }
}

}  // namespace
}  // namespace ddprun::store
