// The embedded default StateStore: one SQLite database, DIR/rendezvous.db (`--state-dir DIR`),
// WAL with synchronous=FULL, so that a completed save survives a crash of the process or the
// machine. Schema, versioning and refusals: sqlite_schema.h and README.md.
//
// Writes go through one writer thread the store owns, which commits every save queued since
// its last commit in one transaction (group commit: one fsync for many saves; a burst of
// decisions at a round's close costs one disk flush, not one per job). Completions are posted
// to the owner's io_context in save order, so the io_context never blocks on the disk.
//
// Only one process may use a state directory: the store holds an exclusive flock on
// DIR/rendezvous.db.lock for its lifetime, and a second open is refused, naming the file.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "common/posix_fd.h"
#include "rendezvous/state/sqlite/sqlite_database.h"
#include "rendezvous/state/state_store.h"

namespace ddprun::rdzv::state {

struct SqliteStateStoreOptions {
  // The state directory; created (with parents) when missing. The database is
  // `<directory>/rendezvous.db`. Required.
  std::string directory;
  // At most this many saves are committed in one transaction. Default 512.
  size_t max_batch = 512;
};

// Threading: the StateStore contract (the owner's io_context thread) for every public method;
// internally one writer thread, started by open() and joined by the destructor.
class SqliteStateStore final : public StateStore {
 public:
  // Creates the directory and database if needed, takes the directory's lock, checks and
  // migrates the schema (sqlite_schema.h) and starts the writer. Blocks on disk I/O.
  static Result<std::unique_ptr<SqliteStateStore>> open(boost::asio::io_context& io,
                                                        SqliteStateStoreOptions options);
  // Writes every save still queued (they become durable), posts their completions to the
  // io_context (they run only if it runs again), joins the writer and releases the lock.
  ~SqliteStateStore() override;

  // Reads the committed state (saves still queued are not in it). Blocks on disk I/O and on a
  // commit in progress.
  Result<std::map<std::string, StoredJob>> load_all() override;
  void save(std::string job_id, JobChange change, std::function<void(Status)> done) override;
  using StateStore::save;
  // Excluded hosts: the table excluded_hosts, written by the same writer (and batches) as jobs.
  Result<std::map<std::string, std::string>> load_excluded_hosts() override;
  void save_excluded_host(std::string host, std::optional<std::string> record,
                          std::function<void(Status)> done) override;
  std::string describe() const override { return "sqlite:" + path_; }

  const std::string& path() const { return path_; }

 private:
  using WorkGuard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  struct Pending {
    std::string job_id;  // or the host, for an excluded host's save
    JobChange change;    // an excluded host's: its record in `job` (nullopt: remove it)
    std::function<void(Status)> done;
    WorkGuard work;  // keeps the owner's io_context running until `done` is posted
    bool excluded_host = false;
  };

  // The statements a save runs, prepared once.
  struct Statements {
    SqliteStatement upsert_job, erase_job, upsert_node, erase_node, erase_nodes, upsert_host,
        erase_host;
  };
  SqliteStateStore(boost::asio::io_context& io, std::string path, size_t max_batch, UniqueFd lock,
                   SqliteDatabase db, Statements statements);
  void enqueue(Pending save);
  void writer_loop();
  Status apply_host(const Pending& save);
  Status commit(const std::vector<Pending>& batch);
  Status apply(const Pending& save, int64_t now_ms);
  // Ends the open transaction after a failure; a rollback that fails too is logged.
  void roll_back();

  boost::asio::io_context& io_;
  const std::string path_;
  const size_t max_batch_;
  UniqueFd lock_;  // exclusive flock on <dir>/rendezvous.db.lock, held while the store lives

  std::mutex db_mutex_;  // guards db_ and its statements (the writer and load_all)
  SqliteDatabase db_;
  Statements sql_;

  std::mutex queue_mutex_;  // guards queue_ and stopping_
  std::condition_variable queue_cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::thread writer_;  // last: started once everything above is built
};

}  // namespace ddprun::rdzv::state
