// Issue 36: the hosts kept out after a node left unfit, in the memory and SQLite state stores:
// set, replaced and removed per host, apart from the jobs, durable across a reopen, in one
// writer's order with job saves; and a version-3 database migrated to version 4 keeping its
// jobs. (etcd: etcd_state_store_test.cc.)
#include <sqlite3.h>

#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "rendezvous/state/memory_state_store.h"
#include "rendezvous/state/sqlite/sqlite_schema.h"
#include "rendezvous/state/sqlite/sqlite_state_store.h"
#include "tests/rendezvous/state/state_test_util.h"

namespace ddprun::rdzv::state {
namespace {

using testing::TempDir;

Status save_host(boost::asio::io_context& io, StateStore& store, const std::string& host,
                 std::optional<std::string> record) {
  std::optional<Status> result;
  store.save_excluded_host(host, std::move(record), [&](Status s) { result = s; });
  EXPECT_TRUE(testing::run_until(io, [&] { return result.has_value(); }));
  return result.value_or(Status::timed_out("save did not complete"));
}

// The same sequence on any store: what it then holds.
std::map<std::string, std::string> set_replace_remove(boost::asio::io_context& io,
                                                      StateStore& store) {
  EXPECT_TRUE(save_host(io, store, "127.0.0.3", std::string("a\0b", 3)).ok());
  EXPECT_TRUE(save_host(io, store, "fd00::7", "first").ok());
  EXPECT_TRUE(save_host(io, store, "fd00::7", "second").ok());
  EXPECT_TRUE(save_host(io, store, "gone", "x").ok());
  EXPECT_TRUE(save_host(io, store, "gone", std::nullopt).ok());
  EXPECT_TRUE(save_host(io, store, "never", std::nullopt).ok());
  auto hosts = store.load_excluded_hosts();
  EXPECT_TRUE(hosts.ok()) << hosts.error_message();
  return hosts ? *hosts : std::map<std::string, std::string>{};
}

const std::map<std::string, std::string> kExpected = {{"127.0.0.3", std::string("a\0b", 3)},
                                                      {"fd00::7", "second"}};

TEST(ExcludedHostsStoreTest, MemoryStoreSetsReplacesAndRemovesAndCanFail) {
  boost::asio::io_context io;
  MemoryStateStore store(io);
  EXPECT_EQ(set_replace_remove(io, store), kExpected);
  EXPECT_TRUE(store.load_all()->empty()) << "hosts are not jobs";
  store.fail_with(Status::unavailable("injected"));
  EXPECT_FALSE(save_host(io, store, "h", "r").ok());
  EXPECT_FALSE(store.load_excluded_hosts().ok());
}

TEST(ExcludedHostsStoreTest, SqliteKeepsThemAcrossAReopenApartFromTheJobs) {
  TempDir dir;
  boost::asio::io_context io;
  {
    auto store = SqliteStateStore::open(io, {.directory = dir.path()});
    ASSERT_TRUE(store.ok()) << store.error_message();
    std::optional<Status> job_saved;
    (*store)->save("job", std::string("j"), [&](Status s) { job_saved = s; });
    EXPECT_EQ(set_replace_remove(io, **store), kExpected);
    ASSERT_TRUE(job_saved && job_saved->ok());
  }
  auto store = SqliteStateStore::open(io, {.directory = dir.path()});
  ASSERT_TRUE(store.ok()) << store.error_message();
  EXPECT_EQ(*(*store)->load_excluded_hosts(), kExpected);
  EXPECT_EQ(testing::job_records(*(*store)->load_all()),
            (std::map<std::string, std::string>{{"job", "j"}}));
}

TEST(ExcludedHostsStoreTest, AVersionThreeDatabaseIsMigratedKeepingItsJobs) {
  TempDir dir;
  {
    // What a version-3 ddp-rendezvous wrote.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "rendezvous.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "PRAGMA application_id = 1684303986;"
                           "CREATE TABLE schema_version (version INTEGER NOT NULL);"
                           "INSERT INTO schema_version VALUES (3);"
                           "CREATE TABLE jobs (job_id TEXT PRIMARY KEY NOT NULL, state BLOB NOT "
                           "NULL, updated_ms INTEGER NOT NULL DEFAULT 0);"
                           "CREATE TABLE nodes (job_id TEXT NOT NULL, node_id TEXT NOT NULL, "
                           "state BLOB NOT NULL, PRIMARY KEY (job_id, node_id)) WITHOUT ROWID;"
                           "INSERT INTO jobs VALUES ('old-job', x'01', 5);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  boost::asio::io_context io;
  auto store = SqliteStateStore::open(io, {.directory = dir.path()});
  ASSERT_TRUE(store.ok()) << store.error_message();
  EXPECT_EQ((*store)->load_all()->at("old-job").job, "\x01");
  EXPECT_TRUE((*store)->load_excluded_hosts()->empty());
  EXPECT_TRUE(save_host(io, **store, "h", "r").ok());
  EXPECT_EQ(kSchemaVersion, 4);
}

}  // namespace
}  // namespace ddprun::rdzv::state
