// parse_state_spec and open_state_store: every accepted form, and errors that name the part
// that is wrong.
#include <gtest/gtest.h>

#include "rendezvous/state/open_state_store.h"
#include "tests/rendezvous/state/state_test_util.h"

namespace ddprun::rdzv::state {
namespace {

using Kind = StateSpec::Kind;

TEST(StateSpecTest, AcceptsEveryForm) {
  auto memory = parse_state_spec("memory:");
  ASSERT_TRUE(memory.ok()) << memory.error_message();
  EXPECT_EQ(memory->kind, Kind::kMemory);

  auto sqlite = parse_state_spec("sqlite:/var/lib/ddprun");
  ASSERT_TRUE(sqlite.ok());
  EXPECT_EQ(sqlite->kind, Kind::kSqlite);
  EXPECT_EQ(sqlite->directory, "/var/lib/ddprun");

  auto plain = parse_state_spec("relative/state");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->kind, Kind::kSqlite);
  EXPECT_EQ(plain->directory, "relative/state");

  auto etcd = parse_state_spec("etcd://h1:2379,h2,[::1]:2380");
  ASSERT_TRUE(etcd.ok()) << etcd.error_message();
  EXPECT_EQ(etcd->kind, Kind::kEtcd);
  EXPECT_EQ(etcd->endpoints, (std::vector<std::string>{"h1:2379", "h2:2379", "[::1]:2380"}));
  EXPECT_EQ(etcd->cluster, "default");

  auto named = parse_state_spec("etcd://127.0.0.1:2379/prod-a");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->cluster, "prod-a");
}

TEST(StateSpecTest, RefusesBadSpecsNamingTheProblem) {
  struct Case {
    const char* spec;
    const char* expect;
  };
  for (const Case& c :
       {Case{"", "empty state spec"}, Case{"sqlite:", "no directory"},
        Case{"etcd://", "empty etcd endpoint"}, Case{"etcd://h1:2379,,h2", "empty etcd endpoint"},
        Case{"etcd://h1:99999", "port 99999 is out of range (1-65535)"},
        Case{"etcd://h1:x", "port 'x' is not a number"},
        Case{"etcd://[::1:2379", "no ']' after the IPv6 address"},
        Case{"etcd://h1/a/b", "one non-empty path segment"},
        Case{"etcd://http://h1:2379", "host:port"}, Case{"etcds://h1:2379", "TLS"},
        Case{"redis://h1", "unknown kind"}, Case{"memory:x", "unknown kind"}}) {
    auto r = parse_state_spec(c.spec);
    ASSERT_FALSE(r.ok()) << c.spec;
    EXPECT_TRUE(r.status().is_invalid_argument()) << c.spec;
    EXPECT_NE(r.error_message().find(c.expect), std::string::npos)
        << c.spec << " -> " << r.error_message();
  }
}

TEST(StateSpecTest, OpensEachKind) {
  boost::asio::io_context io;
  testing::TempDir dir;
  auto memory = open_state_store(io, "memory:");
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ((*memory)->describe(), "memory:");

  auto sqlite = open_state_store(io, dir / "nested/state");
  ASSERT_TRUE(sqlite.ok()) << sqlite.error_message();
  EXPECT_EQ((*sqlite)->describe(), "sqlite:" + (dir / "nested/state/rendezvous.db"));

  // Opening an etcd store sends nothing yet: no server is needed to build it.
  auto etcd = open_state_store(io, "etcd://127.0.0.1:2379,127.0.0.2:2379/c1");
  ASSERT_TRUE(etcd.ok());
  EXPECT_EQ((*etcd)->describe(),
            "etcd://127.0.0.1:2379,127.0.0.2:2379 (keys under /ddprun/c1/jobs/)");

  auto bad = open_state_store(io, "redis://x");
  EXPECT_FALSE(bad.ok());
}

TEST(StateSpecTest, UnusableDirectoryIsAnErrorNamingIt) {
  boost::asio::io_context io;
  testing::TempDir dir;
  {
    std::FILE* f = std::fopen((dir / "file").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  auto r = open_state_store(io, "sqlite:" + (dir / "file/state"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find(dir / "file/state"), std::string::npos) << r.error_message();
}

}  // namespace
}  // namespace ddprun::rdzv::state
