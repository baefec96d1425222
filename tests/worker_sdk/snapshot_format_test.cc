// The snapshot codec on byte strings: every malformed input is a clean, specific error.
#include <gtest/gtest.h>

#include <limits>

#include <nlohmann/json.hpp>

#include "worker_sdk/src/snapshot_format.h"

namespace ddp::detail {
namespace {

SnapshotHeader sample_header() {
  SnapshotHeader h;
  h.epoch = 3;
  h.step_in_epoch = 5;
  h.global_step = 41;
  h.world_size = 2;
  h.user = {{"best", "0.9"}, {"note", "line\nbreak"}};
  return h;
}

std::string error_of(std::string_view bytes) {
  auto decoded = decode_snapshot(bytes);
  return decoded.ok() ? "" : decoded.error_message();
}

TEST(SnapshotFormatTest, RoundTrip) {
  const std::string payload("\0binary\xff payload", 16);
  const std::string bytes = encode_snapshot(sample_header(), payload);
  auto decoded = decode_snapshot(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.error_message();
  EXPECT_EQ(decoded->payload, payload);
  EXPECT_EQ(decoded->header.epoch, 3);
  EXPECT_EQ(decoded->header.step_in_epoch, 5);
  EXPECT_EQ(decoded->header.global_step, 41);
  EXPECT_EQ(decoded->header.world_size, 2);
  EXPECT_EQ(decoded->header.user.at("note"), "line\nbreak");
  EXPECT_EQ(decoded->header.payload_bytes, payload.size());
}

TEST(SnapshotFormatTest, MalformedInputsGiveSpecificErrors) {
  const std::string good = encode_snapshot(sample_header(), "payload bytes");
  EXPECT_NE(error_of("").find("bad magic"), std::string::npos);
  EXPECT_NE(error_of("PK\x03\x04 a zip").find("bad magic"), std::string::npos);
  std::string v2 = good;
  v2[8] = '2';
  EXPECT_NE(error_of(v2).find("format version 2, this SDK reads version 1"), std::string::npos);
  EXPECT_NE(error_of("DDPSNAP 1\n{\"epoch\":").find("truncated header"), std::string::npos);
  EXPECT_NE(error_of("DDPSNAP 1\n{not json}\n").find("malformed header"), std::string::npos);
  EXPECT_NE(error_of("DDPSNAP 1\n{}\n").find("malformed header"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, good.size() - 3)).find("truncated: header promises 13"),
            std::string::npos);
  EXPECT_NE(error_of(good + "x").find("trailing bytes"), std::string::npos);
  std::string flipped = good;
  flipped.back() ^= 1;
  EXPECT_NE(error_of(flipped).find("checksum mismatch"), std::string::npos);
  EXPECT_NE(error_of("DDPSNAP 1\n" + std::string(kMaxHeaderBytes + 1, ' '))
                .find("header larger than 1 MiB"),
            std::string::npos);
}

// Found by fuzz/snapshot_header_fuzzer: a header number out of its field's range (here
// 1e35 steps) was converted with nlohmann's get<int64_t>(), which is undefined behaviour for a
// float that does not fit (UBSan: float-cast-overflow) and wraps large integers. Every such
// value is now a "malformed header" error naming the field.
TEST(SnapshotFormatTest, FuzzHeaderNumberOutOfRangeIsAnErrorNotUndefinedBehaviour) {
  // The fuzzer's input, minimised: step_in_epoch = 99999999999999999999999999999999992.
  const std::string crash =
      "DDPSNAP 1\n{\"epoch\":3,\"global_step\":1217,\"payload_bytes\":11,"
      "\"cyload_crc32\":400824267,\"step_in_epoch\":99999999999999999999999999999999992}\n"
      "PK\x03\x04peyd";
  EXPECT_NE(error_of(crash).find("malformed header: 'step_in_epoch' is 1e+35, not a whole number"),
            std::string::npos)
      << error_of(crash);

  // Every field, every way out of range.
  auto header_with = [](const std::string& field, const std::string& value) {
    nlohmann::json h = {{"epoch", 0},
                        {"step_in_epoch", 0},
                        {"global_step", 0},
                        {"world_size", 1},
                        {"user", nlohmann::json::object()},
                        {"payload_bytes", 0},
                        {"payload_crc32", 0}};
    h[field] = nlohmann::json::parse(value);
    return "DDPSNAP 1\n" + h.dump() + "\n";
  };
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"epoch", "1e300"},           {"global_step", "-1e300"},
      {"step_in_epoch", "1.5"},     {"epoch", "18446744073709551615"},
      {"world_size", "4294967296"}, {"world_size", "-2147483649"},
      {"payload_bytes", "-1"},      {"payload_crc32", "4294967296"},
      {"payload_crc32", "\"0\""},
  };
  for (const auto& [field, value] : bad) {
    EXPECT_NE(error_of(header_with(field, value)).find("malformed header"), std::string::npos)
        << field << " = " << value;
  }
  // The extremes that do fit are still read.
  auto max = decode_snapshot(header_with("global_step", "9223372036854775807"));
  ASSERT_TRUE(max.ok()) << max.error_message();
  EXPECT_EQ(max->header.global_step, std::numeric_limits<int64_t>::max());
  auto crc = decode_snapshot(header_with("payload_crc32", "4294967295"));
  ASSERT_FALSE(crc.ok());  // the CRC of an empty payload is 0: only the checksum is wrong now
  EXPECT_NE(crc.error_message().find("checksum mismatch"), std::string::npos);
}

}  // namespace
}  // namespace ddp::detail
