// The snapshot codec on byte strings: every malformed input is a clean, specific error.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ddp::detail
