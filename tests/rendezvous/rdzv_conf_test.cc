#include "rendezvous/conf/rdzv_conf.h"

#include <gtest/gtest.h>

namespace ddprun::rdzv {
namespace {

TEST(RdzvConfTest, DefaultsMatchTorchrun) {
  auto conf = parse_rdzv_conf("");
  ASSERT_TRUE(conf.ok());
  EXPECT_EQ(conf->join_timeout, Millis(600'000));
  EXPECT_EQ(conf->last_call_timeout, Millis(30'000));
  EXPECT_EQ(conf->close_timeout, Millis(30'000));
  EXPECT_EQ(conf->read_timeout, Millis(60'000));
  EXPECT_EQ(conf->keep_alive_interval, Millis(5'000));
  EXPECT_EQ(conf->heartbeat_timeout, Millis(15'000));
  EXPECT_FALSE(conf->is_host.has_value());
  EXPECT_EQ(conf->exclude_cooldown, Millis(3'600'000));
}

// Issue 36: the cool-down of an agent-hosted server, 0 meaning none.
TEST(RdzvConfTest, ExcludeCooldownIsADuration) {
  auto conf = parse_rdzv_conf("exclude_cooldown=90");
  ASSERT_TRUE(conf.ok()) << conf.error_message();
  EXPECT_EQ(conf->exclude_cooldown, Millis(90'000));
  EXPECT_EQ(parse_rdzv_conf("exclude_cooldown=0")->exclude_cooldown, Millis(0));
  EXPECT_FALSE(parse_rdzv_conf("exclude_cooldown=soon").ok());
}

TEST(RdzvConfTest, ParsesSecondsAndMillisecondsAndBooleans) {
  auto conf = parse_rdzv_conf(
      "join_timeout=2, last_call_timeout=250ms,keep_alive_interval=0.1,"
      "keep_alive_max_attempt=4,is_host=false,read_timeout=1.5s");
  ASSERT_TRUE(conf.ok()) << conf.error_message();
  EXPECT_EQ(conf->join_timeout, Millis(2000));
  EXPECT_EQ(conf->last_call_timeout, Millis(250));
  EXPECT_EQ(conf->keep_alive_interval, Millis(100));
  EXPECT_EQ(conf->heartbeat_timeout, Millis(400));
  EXPECT_EQ(conf->read_timeout, Millis(1500));
  EXPECT_EQ(conf->is_host, false);
}

TEST(RdzvConfTest, UnknownKeysAreAcceptedAndListedWithASuggestion) {
  auto conf = parse_rdzv_conf("join_timout=5,my_launcher_key=x,read_timeout=7");
  ASSERT_TRUE(conf.ok()) << conf.error_message();
  EXPECT_EQ(conf->read_timeout, Millis(7000));
  EXPECT_EQ(conf->join_timeout, Millis(600'000));  // the typo changed nothing
  ASSERT_EQ(conf->ignored_keys.size(), 2u);
  EXPECT_EQ(conf->ignored_keys[0], "join_timout (did you mean 'join_timeout'?)");
  EXPECT_EQ(conf->ignored_keys[1], "my_launcher_key");
}

TEST(RdzvConfTest, KeysLaunchScriptsPassTakeTorchrunsMeaning) {
  auto conf = parse_rdzv_conf("timeout=900,store_type=tcp,use_libuv=1");
  ASSERT_TRUE(conf.ok()) << conf.error_message();
  EXPECT_EQ(conf->join_timeout, Millis(900'000));  // the etcd backends' rendezvous deadline
  EXPECT_TRUE(conf->ignored_keys.empty());
  EXPECT_TRUE(conf->notes.empty());
  auto both = parse_rdzv_conf("timeout=900,join_timeout=30");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->join_timeout, Millis(30'000));  // the explicit key wins
  auto file = parse_rdzv_conf("store_type=file");
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(file->notes.size(), 1u);
  EXPECT_NE(file->notes[0].find("no effect"), std::string::npos);
  EXPECT_FALSE(parse_rdzv_conf("store_type=etcd").ok());
  EXPECT_FALSE(parse_rdzv_conf("use_libuv=perhaps").ok());
}

TEST(RdzvConfTest, RepeatedAndBadValuesAreErrorsNamingTheKey) {
  EXPECT_FALSE(parse_rdzv_conf("join_timeout=1,join_timeout=2").ok());
  auto bad = parse_rdzv_conf("last_call_timeout=soon");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("last_call_timeout"), std::string::npos);
  EXPECT_FALSE(parse_rdzv_conf("is_host=maybe").ok());
  EXPECT_FALSE(parse_rdzv_conf("novalue").ok());
  EXPECT_FALSE(parse_rdzv_conf("keep_alive_interval=0").ok());
}

// torchrun's defaults are heartbeat_timeout=5 and keep_alive_interval=5: its heartbeat_timeout
// bounds one keep-alive exchange, and a node is lost after interval x attempts. Every such
// value is accepted, with that meaning and a note; a longer one is ddprun's window of silence.
TEST(RdzvConfTest, TorchrunsHeartbeatTimeoutValuesAreAcceptedWithTorchrunsMeaning) {
  for (const char* text : {"heartbeat_timeout=5", "heartbeat_timeout=1,keep_alive_interval=2",
                           "heartbeat_timeout=5,keep_alive_interval=5,keep_alive_max_attempt=4",
                           "heartbeat_timeout=0"}) {
    SCOPED_TRACE(text);
    auto conf = parse_rdzv_conf(text);
    ASSERT_TRUE(conf.ok()) << conf.error_message();
    EXPECT_EQ(conf->heartbeat_timeout, conf->keep_alive_interval * conf->keep_alive_max_attempt);
    ASSERT_EQ(conf->notes.size(), 1u);
    EXPECT_NE(conf->notes[0].find("as in torchrun"), std::string::npos) << conf->notes[0];
  }
  auto longer = parse_rdzv_conf("heartbeat_timeout=20");
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(longer->heartbeat_timeout, Millis(20'000));
  EXPECT_TRUE(longer->notes.empty());
}

// Found by fuzz/rdzv_conf_fuzzer: a duration beyond int64 milliseconds went through llround,
// whose result is then unspecified: "6666666666666066666666660" seconds came out negative.
// Durations above kMaxDuration are now refused by name; the largest one is still read.
TEST(RdzvConfTest, FuzzDurationTooLongIsAnErrorNotANegativeTimeout) {
  auto huge = parse_rdzv_conf("join_timeout=6666666666666066666666660");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error_message().find("join_timeout"), std::string::npos) << huge.error_message();
  EXPECT_NE(huge.error_message().find("too long"), std::string::npos) << huge.error_message();
  EXPECT_FALSE(parse_duration("1e300ms").ok());
  EXPECT_FALSE(parse_duration("1000000001").ok());
  auto max = parse_duration("1000000000");
  ASSERT_TRUE(max.ok()) << max.error_message();
  EXPECT_EQ(*max, kMaxDuration);
  EXPECT_EQ(*parse_duration("1000000000000ms"), kMaxDuration);

  // Found by the long run: the derived heartbeat_timeout (interval x attempts) went past it,
  // and with a long enough interval would have overflowed int64.
  auto derived = parse_rdzv_conf("keep_alive_max_attempt=492155739");
  ASSERT_FALSE(derived.ok());
  EXPECT_NE(derived.error_message().find("keep_alive_max_attempt"), std::string::npos);
  EXPECT_FALSE(
      parse_rdzv_conf("keep_alive_interval=1000000000,keep_alive_max_attempt=2147483647").ok());
  auto most = parse_rdzv_conf("keep_alive_interval=1000000,keep_alive_max_attempt=1000");
  ASSERT_TRUE(most.ok()) << most.error_message();
  EXPECT_EQ(most->heartbeat_timeout, kMaxDuration);
}

}  // namespace
}  // namespace ddprun::rdzv
