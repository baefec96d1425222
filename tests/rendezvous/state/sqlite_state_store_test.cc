// SqliteStateStore on real files in temp dirs: durability across reopen and across a process
// killed mid-write, order of completions, the directory lock, and every database it must refuse
// (not SQLite, corrupt, another program's, a newer schema) without touching the file; and the
// migration of a version-1 database.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "rendezvous/state/sqlite/sqlite_schema.h"
#include "rendezvous/state/sqlite/sqlite_state_store.h"
#include "tests/rendezvous/state/state_test_util.h"
#include "tests/support/text_file.h"

namespace ddprun::rdzv::state {
namespace {

using testing::TempDir;
using namespace std::chrono_literals;

std::unique_ptr<SqliteStateStore> open_ok(boost::asio::io_context& io, const std::string& dir) {
  auto store = SqliteStateStore::open(io, {.directory = dir});
  EXPECT_TRUE(store.ok()) << store.error_message();
  return store ? std::move(*store) : nullptr;
}

// Saves and runs `io` until the save completed; its status.
Status save_sync(boost::asio::io_context& io, StateStore& store, const std::string& job,
                 std::optional<std::string> state) {
  std::optional<Status> result;
  store.save(job, std::move(state), [&](Status s) { result = s; });
  EXPECT_TRUE(testing::run_until(io, [&] { return result.has_value(); }));
  return result.value_or(Status::timed_out("save did not complete"));
}

// Runs SQL on a database file with the plain SQLite API, as another program would.
void raw_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

TEST(SqliteStateStoreTest, SavesSurviveReopenAndForgottenJobsStayGone) {
  TempDir dir;
  boost::asio::io_context io;
  std::string binary("\0\x01\xff state", 9);
  {
    auto store = open_ok(io, dir.path());
    ASSERT_TRUE(store);
    ASSERT_TRUE(save_sync(io, *store, "job-a", binary).ok());
    ASSERT_TRUE(save_sync(io, *store, "job-b", "b1").ok());
    ASSERT_TRUE(save_sync(io, *store, "job-c", "c1").ok());
    ASSERT_TRUE(save_sync(io, *store, "job-b", "b2").ok());
    ASSERT_TRUE(save_sync(io, *store, "job-c", std::nullopt).ok());
    ASSERT_TRUE(save_sync(io, *store, "never-saved", std::nullopt).ok());
  }
  auto store = open_ok(io, dir.path());
  ASSERT_TRUE(store);
  auto all = store->load_all();
  ASSERT_TRUE(all.ok()) << all.error_message();
  EXPECT_EQ(testing::job_records(*all),
            (std::map<std::string, std::string>{{"job-a", binary}, {"job-b", "b2"}}));
}

// Issue 25: a save carries the nodes that changed; the others keep their records, and every
// save of a batch applies in order (a node added, changed and removed in one transaction).
TEST(SqliteStateStoreTest, NodeRecordsChangeOneByOneAndGoWithTheirJob) {
  TempDir dir;
  boost::asio::io_context io;
  auto change = [](std::string job, std::map<std::string, std::optional<std::string>> nodes) {
    return JobChange{std::move(job), std::move(nodes)};
  };
  {
    auto store = open_ok(io, dir.path());
    ASSERT_TRUE(store);
    std::vector<Status> results;
    auto done = [&](Status s) { results.push_back(s); };
    store->save("j", change("j1", {{"a", "a1"}, {"b", "b1"}, {"c", "c1"}}), done);
    store->save("j", change("j2", {{"b", "b2"}, {"c", std::nullopt}, {"d", "d1"}}), done);
    store->save("j", change("j3", {{"d", std::nullopt}}), done);
    store->save("gone", change("g1", {{"x", "x1"}}), done);
    store->save("gone", JobChange{}, done);  // forgotten with its nodes
    ASSERT_TRUE(testing::run_until(io, [&] { return results.size() == 5; }));
    for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.message();
  }
  auto store = open_ok(io, dir.path());
  ASSERT_TRUE(store);
  auto all = store->load_all();
  ASSERT_TRUE(all.ok()) << all.error_message();
  EXPECT_EQ(*all, (std::map<std::string, StoredJob>{{"j", {"j3", {{"a", "a1"}, {"b", "b2"}}}}}));
}

TEST(SqliteStateStoreTest, CompletionsArePostedInSaveOrderAndTheLastStateWins) {
  TempDir dir;
  boost::asio::io_context io;
  auto store = open_ok(io, dir.path());
  ASSERT_TRUE(store);
  std::vector<int> completed;
  const int kSaves = 300;
  for (int i = 0; i < kSaves; ++i) {
    std::optional<std::string> state = std::to_string(i);
    // A forget now and then, overwritten by the job's next save, except the very last save
    // (299, job-2): that job ends forgotten.
    if (i % 50 == 49) state.reset();
    store->save("job-" + std::to_string(i % 3), state, [&, i](Status s) {
      EXPECT_TRUE(s.ok()) << s.message();
      completed.push_back(i);
    });
  }
  EXPECT_TRUE(completed.empty()) << "a completion ran inside save()";
  ASSERT_TRUE(testing::run_until(io, [&] { return completed.size() == kSaves; }));
  for (int i = 0; i < kSaves; ++i) ASSERT_EQ(completed[i], i);
  auto all = store->load_all();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(testing::job_records(*all),
            (std::map<std::string, std::string>{{"job-0", "297"}, {"job-1", "298"}}));
}

TEST(SqliteStateStoreTest, DestroyingTheStoreFinishesQueuedSaves) {
  TempDir dir;
  boost::asio::io_context io;
  {
    auto store = open_ok(io, dir.path());
    ASSERT_TRUE(store);
    for (int i = 0; i < 100; ++i) store->save("job", std::to_string(i), [](Status) {});
  }          // destroyed without running io: the writer still commits everything queued
  io.run();  // the completions were posted; they run now and nothing dangles
  auto store = open_ok(io, dir.path());
  EXPECT_EQ(store->load_all()->at("job").job, "99");
}

TEST(SqliteStateStoreTest, SecondStoreOnTheSameDirectoryIsRefused) {
  TempDir dir;
  boost::asio::io_context io;
  auto first = open_ok(io, dir.path());
  ASSERT_TRUE(first);
  auto second = SqliteStateStore::open(io, {.directory = dir.path()});
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(second.status().is_refused());
  EXPECT_NE(second.error_message().find(dir / "rendezvous.db.lock"), std::string::npos)
      << second.error_message();
  first.reset();
  EXPECT_TRUE(SqliteStateStore::open(io, {.directory = dir.path()}).ok());
}

TEST(SqliteStateStoreTest, CompletedSavesSurviveAWriterKilledMidWrite) {
  TempDir dir;
  testing::Child writer({STATE_TEST_HELPER, "sqlite-writer", dir.path()}, dir / "writer.err");
  ASSERT_EQ(writer.read_line(10s).value_or("(nothing)"), "ready");
  // Let it get well into its loop, then kill it in the middle of whatever it is doing.
  std::vector<std::string> lines;
  ASSERT_TRUE(testing::wait_for_output(
      {&writer}, [&] { return writer.lines().size() >= 400; }, 30s))
      << "the writer acknowledged only " << writer.lines().size() << " saves";
  writer.kill();
  lines = writer.drain_lines();
  std::map<std::string, uint64_t> acked;  // job -> highest acknowledged sequence
  for (const auto& line : lines) {
    ASSERT_EQ(line.rfind("acked ", 0), 0u) << line;
    const uint64_t seq = std::stoull(line.substr(6));
    auto& best = acked["job-" + std::to_string(seq % 7)];
    best = std::max(best, seq);
  }
  boost::asio::io_context io;
  auto store = open_ok(io, dir.path());  // also proves the file is intact and unlocked
  ASSERT_TRUE(store);
  auto all = store->load_all();
  ASSERT_TRUE(all.ok()) << all.error_message();
  for (const auto& [job, seq] : acked) {
    ASSERT_TRUE(all->count(job)) << job << " lost";
    const uint64_t stored = std::stoull(all->at(job).job);
    EXPECT_GE(stored, seq) << job << ": an acknowledged save was lost";
    EXPECT_EQ("job-" + std::to_string(stored % 7), job) << "a state landed under another job";
  }
  RecordProperty("acknowledged_saves", static_cast<int>(lines.size()));
}

class SqliteRefusalTest : public ::testing::Test {
 protected:
  // Opening must fail with `kind`, name the file and what to do, and leave the file unchanged.
  void expect_refused(ErrorKind kind, const std::string& words) {
    const std::string path = dir_ / "rendezvous.db";
    const std::string before = ddprun::testing::read_text_file(path);
    boost::asio::io_context io;
    auto store = SqliteStateStore::open(io, {.directory = dir_.path()});
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().kind(), kind) << store.error_message();
    const std::string& m = store.error_message();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find(words), std::string::npos) << m;
    EXPECT_NE(m.find("Move the file away"), std::string::npos) << m;
    EXPECT_EQ(ddprun::testing::read_text_file(path), before) << "a refused database was modified";
  }
  // A healthy database with `jobs` jobs of 1 KiB each, closed (checkpointed into the file).
  void make_database(int jobs) {
    boost::asio::io_context io;
    auto store = open_ok(io, dir_.path());
    ASSERT_TRUE(store);
    for (int i = 0; i < jobs; ++i) {
      ASSERT_TRUE(save_sync(io, *store, "job-" + std::to_string(i), std::string(1024, 'x')).ok());
    }
  }
  TempDir dir_;
};

TEST_F(SqliteRefusalTest, AFileThatIsNotADatabase) {
  std::ofstream(dir_ / "rendezvous.db") << std::string(8192, 'z');
  expect_refused(ErrorKind::kMalformed, "not a SQLite database");
}

TEST_F(SqliteRefusalTest, ADatabaseWithADamagedPage) {
  make_database(50);
  // Overwrite the second half of the file's second page (a b-tree page of `jobs`).
  const std::string path = dir_ / "rendezvous.db";
  ASSERT_GT(std::filesystem::file_size(path), 3 * 4096u);
  const int fd = ::open(path.c_str(), O_WRONLY);
  const std::string garbage(2048, '\x5a');
  ASSERT_EQ(::pwrite(fd, garbage.data(), garbage.size(), 4096 + 2048), 2048);
  ::close(fd);
  expect_refused(ErrorKind::kMalformed, "corrupt");
}

TEST_F(SqliteRefusalTest, AnotherProgramsDatabase) {
  raw_sql(dir_ / "rendezvous.db", "CREATE TABLE photos (id INTEGER);");
  expect_refused(ErrorKind::kRefused, "another program");
  raw_sql(dir_ / "rendezvous.db", "PRAGMA application_id = 42;");
  expect_refused(ErrorKind::kRefused, "application_id 0x2a");
}

TEST_F(SqliteRefusalTest, ADatabaseFromANewerVersion) {
  make_database(3);
  raw_sql(dir_ / "rendezvous.db", "UPDATE schema_version SET version = 99;");
  expect_refused(ErrorKind::kRefused, "newer ddp-rendezvous (schema version 99");
}

TEST_F(SqliteRefusalTest, OurDatabaseWithoutItsVersionTable) {
  make_database(1);
  raw_sql(dir_ / "rendezvous.db", "DROP TABLE schema_version;");
  expect_refused(ErrorKind::kMalformed, "schema_version table is missing");
}

TEST(SqliteMigrationTest, VersionOneIsMigratedKeepingItsJobs) {
  TempDir dir;
  // What a version-1 ddp-rendezvous wrote.
  raw_sql(dir / "rendezvous.db",
          "PRAGMA application_id = 1684303986;"  // 0x64647072
          "CREATE TABLE schema_version (version INTEGER NOT NULL);"
          "INSERT INTO schema_version VALUES (1);"
          "CREATE TABLE jobs (job_id TEXT PRIMARY KEY NOT NULL, state BLOB NOT NULL);"
          "INSERT INTO jobs VALUES ('old-job', x'00ff01');");
  boost::asio::io_context io;
  {
    auto store = open_ok(io, dir.path());
    ASSERT_TRUE(store);
    EXPECT_EQ(store->load_all()->at("old-job").job, std::string("\0\xff\x01", 3));
    ASSERT_TRUE(save_sync(io, *store, "new-job", "n").ok());
  }
  auto db = SqliteDatabase::open(dir / "rendezvous.db");
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*db->query_int("SELECT version FROM schema_version;"), kSchemaVersion);
  EXPECT_EQ(*db->query_int("SELECT count(*) FROM jobs WHERE updated_ms > 0;"), 1);
  EXPECT_EQ(**db->query_text("PRAGMA journal_mode;"), "wal");
}

}  // namespace
}  // namespace ddprun::rdzv::state
