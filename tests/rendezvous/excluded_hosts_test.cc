// Issue 36, hosts kept out after a node left unfit: the pure registry (excluded_hosts.h) on
// explicit times, its stored record, and JobRegistry's use of it on a hand-moved wall clock with a
// memory state store (refusals with kJoinRefusedHostExcluded, release, cool-down, restore).
#include "rendezvous/server/excluded_hosts.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <string>
#include <vector>

#include "common/clock.h"
#include "rendezvous/daemon/status_command.h"
#include "rendezvous/server/job_registry.h"
#include "rendezvous/state/memory_state_store.h"
#include "tests/rendezvous/rdzv_test_util.h"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;

const WallTime kT0 = WallTime(std::chrono::sys_days{std::chrono::year{2026} / 11 / 28});

ExcludedHost record(const std::string& host, WallTime since, Millis cooldown,
                    const std::string& reason = "its workers caused 3 of the job's failures") {
  return ExcludedHost{host, reason, "job-a", host + ":77", since, since + cooldown};
}

TEST(ExcludedHostsTest, AHostIsKeptOutUntilItsCooldownEnds) {
  ExcludedHosts hosts;
  EXPECT_FALSE(hosts.exclude(record("127.0.0.3", kT0, 1h)));
  auto kept = hosts.check("127.0.0.3", kT0 + 59min);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->reason, "its workers caused 3 of the job's failures");
  EXPECT_FALSE(hosts.check("127.0.0.4", kT0));
  EXPECT_FALSE(hosts.check("127.0.0.3", kT0 + 1h)) << "the end is exclusive";
  EXPECT_EQ(hosts.size(), 1u) << "until expire() takes it with its stored record";
  EXPECT_EQ(hosts.expire(kT0 + 1h), std::vector<std::string>{"127.0.0.3"});
  EXPECT_EQ(hosts.size(), 0u);
}

TEST(ExcludedHostsTest, ALaterVerdictReplacesTheReasonAndNeverShortensTheCooldown) {
  ExcludedHosts hosts;
  hosts.exclude(record("h", kT0, 2h, "first"));
  hosts.exclude(record("h", kT0 + 10min, 1h, "second"));
  auto kept = hosts.check("h", kT0);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->reason, "second");
  EXPECT_EQ(kept->until, kT0 + 2h);
  hosts.exclude(record("h", kT0 + 90min, 1h, "third"));
  EXPECT_EQ(hosts.check("h", kT0)->until, kT0 + 150min);
  EXPECT_EQ(hosts.size(), 1u);
}

TEST(ExcludedHostsTest, ReleaseListAndExpire) {
  ExcludedHosts hosts;
  hosts.exclude(record("b", kT0, 1h));
  hosts.exclude(record("a", kT0, 2h));
  hosts.exclude(record("c", kT0, 3h));
  EXPECT_TRUE(hosts.release("c"));
  EXPECT_FALSE(hosts.release("c"));
  auto listed = hosts.list(kT0);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].host, "a");  // by host name
  EXPECT_EQ(listed[1].host, "b");
  EXPECT_EQ(hosts.list(kT0 + 1h).size(), 1u) << "expired records are not listed";
  EXPECT_EQ(hosts.expire(kT0 + 1h), std::vector<std::string>{"b"});
  EXPECT_EQ(hosts.size(), 1u);
}

TEST(ExcludedHostsTest, BoundedItEvictsTheHostWhoseCooldownEndsFirst) {
  ExcludedHosts hosts(3);
  hosts.exclude(record("a", kT0, 3h));
  hosts.exclude(record("b", kT0, 1h));
  hosts.exclude(record("c", kT0, 2h));
  EXPECT_EQ(hosts.exclude(record("d", kT0, 4h)), "b");
  EXPECT_EQ(hosts.size(), 3u);
  EXPECT_FALSE(hosts.check("b", kT0));
  EXPECT_TRUE(hosts.check("d", kT0));
  EXPECT_FALSE(hosts.exclude(record("a", kT0, 5h))) << "a host already kept out takes no slot";
  EXPECT_EQ(ExcludedHosts::kDefaultMaxHosts, 10'000u);
}

TEST(ExcludedHostsTest, TheStoredRecordRoundTripsAndMalformedBytesAreRefused) {
  const ExcludedHost r = record("fd00::7", kT0, 1h);
  auto back = decode_excluded_host("fd00::7", encode_excluded_host(r));
  ASSERT_TRUE(back.ok()) << back.error_message();
  EXPECT_EQ(*back, r);
  const std::string bytes = encode_excluded_host(r);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(decode_excluded_host("h", bytes.substr(0, cut)).ok()) << cut;
  }
  EXPECT_FALSE(decode_excluded_host("h", bytes + "x").ok());
  std::string other_format = bytes;
  other_format[0] = 9;
  auto refused = decode_excluded_host("h", other_format);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error_message().find("excluded host 'h'"), std::string::npos);
}

TEST(ExcludedHostsTest, TimesAreSaidInUtcIso8601) {
  EXPECT_EQ(format_utc(kT0 + 12h + 34min + 56s), "2026-11-28T12:34:56Z");
  EXPECT_EQ(from_unix_ms(unix_ms(kT0)), kT0);
  EXPECT_EQ(from_unix_ms(-5), WallTime{}) << "clamped, never wrapped";
}

// `ddp-rendezvous status`: the hosts kept out follow the jobs (also when there are none), with
// until when in UTC and the time left; --json has them too.
TEST(ExcludedHostsStatusTest, TheTableAndTheJsonListTheHostsKeptOut) {
  StatusReport report;
  report.excluded_hosts.push_back({"127.0.0.3", "it failed its health check", "job-a",
                                   "127.0.0.3:77", unix_ms(kT0), unix_ms(kT0 + 2h + 5min)});
  const std::string table = render_status_table(report, kT0);
  EXPECT_EQ(table.rfind("no jobs\n", 0), 0u) << table;
  EXPECT_NE(table.find("EXCLUDED HOST"), std::string::npos) << table;
  EXPECT_NE(table.find("127.0.0.3"), std::string::npos) << table;
  EXPECT_NE(table.find("2026-11-28T02:05:00Z"), std::string::npos) << table;
  EXPECT_NE(table.find("2h05m"), std::string::npos) << table;
  EXPECT_NE(table.find("it failed its health check"), std::string::npos) << table;
  EXPECT_EQ(render_status_table(StatusReport{}, kT0), "no jobs\n") << "no section without hosts";
  const auto json = status_to_json(report);
  ASSERT_EQ(json["excluded_hosts"].size(), 1u);
  EXPECT_EQ(json["excluded_hosts"][0]["host"], "127.0.0.3");
  EXPECT_EQ(json["excluded_hosts"][0]["until"], "2026-11-28T02:05:00Z");
  EXPECT_EQ(json["excluded_hosts"][0]["job_id"], "job-a");
}

// A connection as the registry sees it.
struct RecordingPeer final : Peer {
  std::vector<ServerMessage> sent;
  void send(const ServerMessage& message) override { sent.push_back(message); }
  void kick(const std::string&) override {}
  std::vector<Reply> replies() const {
    std::vector<Reply> out;
    for (const auto& m : sent)
      if (const auto* r = std::get_if<Reply>(&m)) out.push_back(*r);
    return out;
  }
};

JoinMsg join_msg(uint32_t request_id, const std::string& node, uint32_t min = 1) {
  JoinRequest r = testing::join_request(node, min, 2);
  r.job.heartbeat_timeout = 60s;
  r.job.join_timeout = 60s;
  return JoinMsg{request_id, r.node, r.job};
}

// Real steady time (the registry's Asio timers run on it) and a wall clock that moves only when
// told to (the cool-downs are wall-clock).
class ManualWallClock final : public Clock {
 public:
  SteadyTime steady_now() const override { return std::chrono::steady_clock::now(); }
  WallTime wall_now() const override { return wall_; }
  void advance(Millis by) { wall_ += by; }

 private:
  WallTime wall_{std::chrono::sys_days{std::chrono::year{2026} / 1 / 1}};
};

class RegistryExclusionTest : public ::testing::Test {
 protected:
  RegistryExclusionTest() { registry_.set_exclude_cooldown(1h); }
  ~RegistryExclusionTest() override { registry_.cancel_timers(); }
  void settle() {
    io_.restart();
    while (io_.poll() > 0) {
    }
  }
  // A node joins `job` on its own connection; the last Reply it got.
  Reply join(const std::string& job, const std::string& node, uint32_t request_id = 7) {
    peers_.push_back(std::make_unique<RecordingPeer>());
    ids_.emplace_back();
    registry_.join(registry_.open_connection(job), *peers_.back(), join_msg(request_id, node),
                   ids_.back());
    settle();
    auto replies = peers_.back()->replies();
    return replies.empty() ? Reply{} : replies.back();
  }
  // The node of the last join leaves unfit.
  void leave_unfit(const std::string& job, const std::string& reason) {
    registry_.leave(registry_.open_connection(job), *peers_.back(), LeaveMsg{8, reason},
                    ids_.back());
    settle();
  }

  boost::asio::io_context io_;
  ManualWallClock clock_;
  std::shared_ptr<ServerCounters> counters_ = std::make_shared<ServerCounters>();
  state::MemoryStateStore store_{io_};
  JobRegistry registry_{io_.get_executor(), clock_, counters_};
  std::vector<std::unique_ptr<RecordingPeer>> peers_;  // the registry keeps pointers to them
  std::vector<std::string> ids_;
};

TEST_F(RegistryExclusionTest, AHostLeftUnfitIsRefusedByEveryJobUntilReleased) {
  ASSERT_TRUE(registry_.restore(store_, [](const Status&) {}).ok());
  ASSERT_TRUE(join("job-a", "127.0.0.3:41:9").ok);
  leave_unfit("job-a", "it failed its health check");
  EXPECT_EQ(counters_->hosts_excluded, 1u);
  ASSERT_EQ(store_.excluded_hosts().count("127.0.0.3"), 1u) << "saved to the state store";

  for (const char* job : {"job-a", "job-b"}) {
    const Reply refused = join(job, "127.0.0.3:42:1");
    EXPECT_FALSE(refused.ok);
    EXPECT_EQ(refused.integer, kJoinRefusedHostExcluded);
    EXPECT_NE(refused.error.find("node host 127.0.0.3 is kept out"), std::string::npos)
        << refused.error;
    EXPECT_NE(refused.error.find("until 2026-01-01T01:00:00Z"), std::string::npos) << refused.error;
    EXPECT_NE(refused.error.find("it failed its health check"), std::string::npos);
    EXPECT_NE(refused.error.find("ddp-rendezvous release 127.0.0.3"), std::string::npos);
  }
  EXPECT_EQ(counters_->joins_refused_excluded, 2u);
  EXPECT_TRUE(join("job-b", "127.0.0.4:43:1").ok) << "another host still joins";
  EXPECT_TRUE(join("job-b", "node-x").ok) << "not an agent's id: its own host";

  ASSERT_EQ(registry_.excluded_hosts().size(), 1u);
  EXPECT_TRUE(registry_.release_host("127.0.0.3"));
  EXPECT_FALSE(registry_.release_host("127.0.0.3"));
  settle();
  EXPECT_EQ(store_.excluded_hosts().count("127.0.0.3"), 0u) << "the release is saved too";
  EXPECT_TRUE(join("job-a", "127.0.0.3:44:1").ok);
}

TEST_F(RegistryExclusionTest, AfterTheCooldownTheHostJoinsAgain) {
  ASSERT_TRUE(registry_.restore(store_, [](const Status&) {}).ok());
  join("job-a", "gpu-7:41:9");
  leave_unfit("job-a", "a rank asked to exclude it");
  clock_.advance(59min);
  EXPECT_EQ(join("job-a", "gpu-7:42:1").integer, kJoinRefusedHostExcluded);
  clock_.advance(1min);
  EXPECT_TRUE(join("job-a", "gpu-7:43:1").ok);
  EXPECT_TRUE(registry_.excluded_hosts().empty());
  settle();
  EXPECT_TRUE(store_.excluded_hosts().empty()) << "the expired record is removed from the store";
}

TEST_F(RegistryExclusionTest, APlainLeaveOrAZeroCooldownKeepsNobodyOut) {
  join("job-a", "h1:41:9");
  leave_unfit("job-a", "");
  EXPECT_TRUE(join("job-a", "h1:42:9").ok);
  registry_.set_exclude_cooldown(0ms);
  leave_unfit("job-a", "unfit, but no cool-down");
  EXPECT_TRUE(join("job-a", "h1:43:9").ok);
  EXPECT_EQ(counters_->hosts_excluded, 0u);
}

TEST_F(RegistryExclusionTest, ARestoredRegistryRefusesTheHostAndDropsExpiredRecords) {
  ASSERT_TRUE(registry_.restore(store_, [](const Status&) {}).ok());
  join("job-a", "h1:41:9");
  leave_unfit("job-a", "too many failures");
  clock_.advance(30min);
  registry_.set_exclude_cooldown(10min);
  join("job-a", "h2:41:9");
  leave_unfit("job-a", "too many failures");
  registry_.stop_recording();
  ASSERT_EQ(store_.excluded_hosts().size(), 2u);

  clock_.advance(15min);  // h2's cool-down is over, h1's is not
  JobRegistry restarted(io_.get_executor(), clock_, nullptr);
  ASSERT_TRUE(restarted.restore(store_, [](const Status&) {}).ok());
  settle();
  auto listed = restarted.excluded_hosts();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].host, "h1");
  EXPECT_EQ(listed[0].job_id, "job-a");
  EXPECT_EQ(store_.excluded_hosts().count("h2"), 0u);
  RecordingPeer peer;
  std::string id;
  restarted.join(restarted.open_connection("job-c"), peer, join_msg(1, "h1:50:1"), id);
  ASSERT_EQ(peer.replies().size(), 1u);
  EXPECT_EQ(peer.replies()[0].integer, kJoinRefusedHostExcluded);
  restarted.cancel_timers();
}

TEST_F(RegistryExclusionTest, AStoredRecordThatCannotBeReadStopsTheRestore) {
  store_.save_excluded_host("h1", std::string("garbage"), [](const Status&) {});
  settle();
  const Status restored = registry_.restore(store_, [](const Status&) {});
  ASSERT_FALSE(restored.ok());
  EXPECT_NE(restored.message().find("excluded host 'h1'"), std::string::npos) << restored.message();
}

}  // namespace
}  // namespace ddprun::rdzv
