#include "rendezvous/state/sqlite/sqlite_state_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "rendezvous/state/sqlite/sqlite_schema.h"

namespace ddprun::rdzv::state {
namespace {

namespace fs = std::filesystem;

Result<UniqueFd> lock_directory(const std::string& lock_path) {
  UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return Status::unavailable(
        fmt::format("cannot open the state lock file {}: {}", lock_path, std::strerror(errno)));
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status::refused(fmt::format(
          "another ddp-rendezvous already uses this state directory (it holds the lock on {}); "
          "stop it first, or give this one another --state-dir",
          lock_path));
    }
    return Status::unavailable(fmt::format("cannot lock {}: {}", lock_path, std::strerror(errno)));
  }
  return fd;
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<std::unique_ptr<SqliteStateStore>> SqliteStateStore::open(boost::asio::io_context& io,
                                                                 SqliteStateStoreOptions options) {
  if (options.directory.empty()) return Status::invalid_argument("the state directory is empty");
  std::error_code ec;
  fs::create_directories(options.directory, ec);
  if (ec) {
    return Status::unavailable(
        fmt::format("cannot create the state directory {}: {}", options.directory, ec.message()));
  }
  const std::string path = (fs::path(options.directory) / "rendezvous.db").string();
  auto lock = lock_directory(path + ".lock");
  if (!lock) return lock.status();
  auto db = SqliteDatabase::open(path);
  if (!db) return db.status();
  if (Status s = prepare_state_database(*db); !s) return s;
  auto upsert_job = db->prepare(
      "INSERT INTO jobs (job_id, state, updated_ms) VALUES (?1, ?2, ?3) ON CONFLICT (job_id) DO "
      "UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms;");
  if (!upsert_job) return upsert_job.status();
  auto erase_job = db->prepare("DELETE FROM jobs WHERE job_id = ?1;");
  if (!erase_job) return erase_job.status();
  auto upsert_node = db->prepare(
      "INSERT INTO nodes (job_id, node_id, state) VALUES (?1, ?2, ?3) ON CONFLICT (job_id, "
      "node_id) DO UPDATE SET state = excluded.state;");
  if (!upsert_node) return upsert_node.status();
  auto erase_node = db->prepare("DELETE FROM nodes WHERE job_id = ?1 AND node_id = ?2;");
  if (!erase_node) return erase_node.status();
  auto erase_nodes = db->prepare("DELETE FROM nodes WHERE job_id = ?1;");
  if (!erase_nodes) return erase_nodes.status();
  auto upsert_host = db->prepare(
      "INSERT INTO excluded_hosts (host, record) VALUES (?1, ?2) ON CONFLICT (host) DO UPDATE "
      "SET record = excluded.record;");
  if (!upsert_host) return upsert_host.status();
  auto erase_host = db->prepare("DELETE FROM excluded_hosts WHERE host = ?1;");
  if (!erase_host) return erase_host.status();
  Statements sql{std::move(*upsert_job), std::move(*erase_job),   std::move(*upsert_node),
                 std::move(*erase_node), std::move(*erase_nodes), std::move(*upsert_host),
                 std::move(*erase_host)};
  return std::unique_ptr<SqliteStateStore>(
      new SqliteStateStore(io, path, std::max<size_t>(1, options.max_batch), std::move(*lock),
                           std::move(*db), std::move(sql)));
}

SqliteStateStore::SqliteStateStore(boost::asio::io_context& io, std::string path, size_t max_batch,
                                   UniqueFd lock, SqliteDatabase db, Statements statements)
    : io_(io),
      path_(std::move(path)),
      max_batch_(max_batch),
      lock_(std::move(lock)),
      db_(std::move(db)),
      sql_(std::move(statements)),
      writer_([this] { writer_loop(); }) {}

SqliteStateStore::~SqliteStateStore() {
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_one();
  writer_.join();
}

Result<std::map<std::string, StoredJob>> SqliteStateStore::load_all() {
  std::lock_guard lock(db_mutex_);
  // One read transaction: the jobs and their nodes as of one commit.
  if (Status s = db_.exec("BEGIN;"); !s) return s.with_context("loading the rendezvous state");
  std::map<std::string, StoredJob> jobs;
  auto read = [&]() -> Status {
    auto job_rows = db_.prepare("SELECT job_id, state FROM jobs;");
    if (!job_rows) return job_rows.status();
    for (;;) {
      auto row = job_rows->step();
      if (!row) return row.status();
      if (!*row) break;
      jobs[job_rows->column_bytes(0)].job = job_rows->column_bytes(1);
    }
    auto node_rows = db_.prepare("SELECT job_id, node_id, state FROM nodes;");
    if (!node_rows) return node_rows.status();
    for (;;) {
      auto row = node_rows->step();
      if (!row) return row.status();
      if (!*row) break;
      auto job = jobs.find(node_rows->column_bytes(0));
      if (job == jobs.end()) {
        return Status::malformed(fmt::format("{}: node '{}' of job '{}', which has no job row",
                                             path_, node_rows->column_bytes(1),
                                             node_rows->column_bytes(0)));
      }
      job->second.nodes.emplace(node_rows->column_bytes(1), node_rows->column_bytes(2));
    }
    return Status();
  };
  const Status result = read();
  if (Status s = db_.exec("COMMIT;"); !s) spdlog::warn("rendezvous state: {}", s.message());
  if (!result) return result.with_context("loading the rendezvous state");
  return jobs;
}

Result<std::map<std::string, std::string>> SqliteStateStore::load_excluded_hosts() {
  std::lock_guard lock(db_mutex_);
  std::map<std::string, std::string> hosts;
  auto rows = db_.prepare("SELECT host, record FROM excluded_hosts;");
  if (!rows) return rows.status().with_context("loading the excluded hosts");
  for (;;) {
    auto row = rows->step();
    if (!row) return row.status().with_context("loading the excluded hosts");
    if (!*row) break;
    hosts.emplace(rows->column_bytes(0), rows->column_bytes(1));
  }
  return hosts;
}

void SqliteStateStore::save(std::string job_id, JobChange change,
                            std::function<void(Status)> done) {
  enqueue(Pending{std::move(job_id), std::move(change), std::move(done),
                  boost::asio::make_work_guard(io_)});
}

void SqliteStateStore::save_excluded_host(std::string host, std::optional<std::string> record,
                                          std::function<void(Status)> done) {
  enqueue(Pending{std::move(host), JobChange{std::move(record), {}}, std::move(done),
                  boost::asio::make_work_guard(io_), true});
}

void SqliteStateStore::enqueue(Pending save) {
  {
    std::lock_guard lock(queue_mutex_);
    queue_.push_back(std::move(save));
  }
  queue_cv_.notify_one();
}

void SqliteStateStore::writer_loop() {
  for (;;) {
    std::vector<Pending> batch;
    {
      std::unique_lock lock(queue_mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every save was written
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    const Status result = commit(batch);
    // One post for the whole batch keeps the completions in save order.
    boost::asio::post(io_, [batch = std::move(batch), result]() mutable {
      for (auto& save : batch) save.done(result);
    });
  }
}

void SqliteStateStore::roll_back() {
  if (Status s = db_.exec("ROLLBACK;"); !s) {
    spdlog::warn("rendezvous state: rolling back a failed save: {}", s.message());
  }
}

Status SqliteStateStore::commit(const std::vector<Pending>& batch) {
  // Every save of the batch, in order (each is a change on top of the ones before), in one
  // transaction: one fsync.
  const int64_t now = wall_ms();
  std::lock_guard lock(db_mutex_);
  if (Status s = db_.exec("BEGIN IMMEDIATE;"); !s) return s.with_context("saving rendezvous state");
  for (const auto& save : batch) {
    if (Status s = apply(save, now); !s) {
      roll_back();
      return s.with_context(save.excluded_host
                                ? fmt::format("saving excluded host '{}'", save.job_id)
                                : fmt::format("saving the state of job '{}'", save.job_id));
    }
  }
  // With synchronous=FULL the WAL is fsynced before COMMIT returns.
  if (Status s = db_.exec("COMMIT;"); !s) {
    roll_back();
    return s.with_context("committing rendezvous state");
  }
  return Status();
}

namespace {
// Runs `stmt` once with `bind` applied; leaves it reset for the next use.
template <class Bind>
Status run(SqliteStatement& stmt, Bind bind) {
  stmt.reset();
  if (Status s = bind(stmt); !s) return s;
  auto done = stmt.step();
  stmt.reset();
  return done.status();
}
}  // namespace

Status SqliteStateStore::apply_host(const Pending& save) {
  const std::string& host = save.job_id;
  const std::optional<std::string>& record = save.change.job;
  return run(record ? sql_.upsert_host : sql_.erase_host, [&](SqliteStatement& st) {
    Status b = st.bind_text(1, host);
    if (b && record) b = st.bind_blob(2, *record);
    return b;
  });
}

Status SqliteStateStore::apply(const Pending& save, int64_t now_ms) {
  if (save.excluded_host) return apply_host(save);
  const std::string& job = save.job_id;
  if (!save.change.job) {
    Status s = run(sql_.erase_nodes, [&](SqliteStatement& st) { return st.bind_text(1, job); });
    if (!s) return s;
    return run(sql_.erase_job, [&](SqliteStatement& st) { return st.bind_text(1, job); });
  }
  Status s = run(sql_.upsert_job, [&](SqliteStatement& st) {
    Status b = st.bind_text(1, job);
    if (b) b = st.bind_blob(2, *save.change.job);
    if (b) b = st.bind_int64(3, now_ms);
    return b;
  });
  for (auto node = save.change.nodes.begin(); s && node != save.change.nodes.end(); ++node) {
    // Not a structured binding: clang 14 cannot capture one in the lambda.
    const std::string& node_id = node->first;
    const std::optional<std::string>& record = node->second;
    s = run(record ? sql_.upsert_node : sql_.erase_node, [&](SqliteStatement& st) {
      Status b = st.bind_text(1, job);
      if (b) b = st.bind_text(2, node_id);
      if (b && record) b = st.bind_blob(3, *record);
      return b;
    });
  }
  return s;
}

}  // namespace ddprun::rdzv::state
